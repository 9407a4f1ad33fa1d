"""Functional (JAX) environment base: reset/step on ``mjx.Data``, jit/vmap/grad-ready.

A task subclasses ``MjxEnv`` and supplies its MJCF path, ``default_config()``, the initial
state distribution, observation, named reward terms, termination and the action map. The
base owns physics, the differentiable step (whose backward pass is the chosen gradient
estimator), divergence handling, truncation, and the Jacobians behind ``grad_step``.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import functools
from pathlib import Path
from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct
from mujoco import mjx

from bcg_envs.gradients.config import BundleConfig
from bcg_envs.gradients.differentiable_step import Branches, DifferentiableStep
from bcg_envs.gradients.registry import Estimator, resolve
from bcg_envs.physics import divergence, mjx_private, model_fields
from bcg_envs.physics.model_fields import RandomizationFn
from bcg_envs.physics.moreau_contact import MoreauContact
from bcg_envs.physics.penalty_contact import PenaltyContact
from bcg_envs.physics.simulator import (
    CONTACT_MODELS,
    KAPPA_MODELS,
    ContactStiffness,
    Physics,
    load_model,
    refresh,
)

#: Info entries holding a running bcg branch rollout (``DifferentiableStep.Branches``):
#: present only in the states of an env whose estimator rolls branches (``bcg`` with
#: ``horizon > 1``; the MuJoCo C backend does not roll branches and never has them).
BRANCH_INFO = ("bundle_branches", "bundle_branch_valid")

#: The Gymnasium envs of both backends clip observations to +-OBS_BOUND, so that they
#: always lie in the observation space.
OBS_BOUND = 1e6

#: ``MjxEnv(randomize=...)``: None (the model as built) or ``"episode"`` (model fields
#: redrawn at every reset).
RANDOMIZE = (None, "episode")

#: Info entries every state carries besides ``rng`` and the task's own, as ``name: (dtype,
#: value at reset)``. Both physics backends start episodes from this one table.
STEP_INFO: Dict[str, Tuple[Any, Any]] = {
    "step": (np.int32, 0),
    "bundle_window": (np.int32, 0),
    "bundled": (np.bool_, False),
    "sim_diverged": (np.bool_, False),
    "truncated": (np.bool_, False),
    "max_contact_force": (np.float32, 0.0),
    "max_contact_rise": (np.float32, 0.0),
    "max_point_force": (np.float32, 0.0),
    "bundle_dropped": (np.int32, 0),
    "bundle_alpha": (np.float32, 1.0),
    "is_success": (np.bool_, False),
}


@struct.dataclass
class State:
    """Environment state (the MuJoCo Playground layout).

    ``pipeline_state`` aliases ``data`` so that Brax's training wrappers accept it.
    """

    data: mjx.Data
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    metrics: Dict[str, jax.Array] = struct.field(default_factory=dict)
    info: Dict[str, Any] = struct.field(default_factory=dict)

    @property
    def pipeline_state(self) -> mjx.Data:
        return self.data


_dataclass_replace = State.replace


def reset_key(rng: np.random.Generator) -> Union[np.ndarray, jax.Array]:
    """The PRNG key of one episode's reset, drawn from a Gymnasium env's ``np_random``:
    ``jax.random.PRNGKey(seed)`` for a seed below 2**31. With JAX's default threefry keys
    that key is the uint32 pair ``[0, seed]``, built here in NumPy: creating it through
    JAX dispatches its ops one by one (~170 us, a third of a C-backend reset)."""
    seed = int(rng.integers(0, 2**31 - 1))
    if jax.config.jax_default_prng_impl == "threefry2x32" and not jax.config.jax_enable_custom_prng:
        return np.array([0, seed], np.uint32)
    return jax.random.PRNGKey(seed)


def _replace(self: State, **updates) -> State:
    """``dataclasses.replace`` that also accepts Brax's ``pipeline_state`` for ``data``."""
    if "pipeline_state" in updates:
        updates["data"] = updates.pop("pipeline_state")
    return _dataclass_replace(self, **updates)


State.replace = _replace  # flax's decorator installs its own replace; extend it here


class Jacobians(NamedTuple):
    """Jacobians of one step in tangent coordinates x = (dq, qvel, act)."""

    A: jax.Array  # d x_{t+1} / d x_t, (nx, nx)
    B: jax.Array  # d x_{t+1} / d a_t, (nx, nu)
    r_x: jax.Array  # d r_t / d x_t, (nx,)
    r_a: jax.Array  # d r_t / d a_t, (nu,)
    C: jax.Array  # d o_{t+1} / d x_{t+1}, (nobs, nx)


def _contact_params(cls, kappa: Optional[float], options: Optional[Dict[str, Any]]):
    """``cls`` (``PenaltyContact`` or ``MoreauContact``) from ``kappa`` and the
    ``contact_options`` dict of its other fields; unknown keys raise ``ValueError``."""
    if options is not None and not isinstance(options, dict):
        raise ValueError(f"contact_options must be a dict, got {type(options).__name__}")
    options = dict(options or {})
    known = [f.name for f in dataclasses.fields(cls) if f.name != "kappa"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(
            f"unknown contact_options {unknown} for {cls.__name__}; known: {known} (kappa is its own argument)"
        )
    if kappa is not None:
        options["kappa"] = kappa
    return cls(**options)


def merge_config(
    defaults: Dict[str, Any], overrides: Optional[Dict[str, Any]], where: str = "config"
) -> Dict[str, Any]:
    """Recursively override ``defaults``; unknown keys raise ``ValueError``."""
    out = copy.deepcopy(defaults)
    for key, value in (overrides or {}).items():
        if key not in out:
            raise ValueError(f"unknown key {where}[{key!r}]; known keys: {sorted(out)}")
        if isinstance(out[key], dict):
            if not isinstance(value, dict):
                raise ValueError(f"{where}[{key!r}] must be a dict, got {value!r}")
            out[key] = merge_config(out[key], value, f"{where}[{key!r}]")
        else:
            out[key] = value
    return out


class MjxEnv(abc.ABC):
    """Base of every bcg_envs task (the functional JAX API; docs/environments.md).

    ``randomize="episode"`` redraws model fields at every reset (see ``reset``) with
    ``randomization_fn`` (MuJoCo Playground's shape, ``physics.model_fields``), by default
    the task's ``default_randomization_fn``; ``randomize=None`` (default) keeps the model
    as built.
    """

    xml_path: Path
    #: Default ``BundleConfig.force_threshold`` (N) of the task.
    default_force_threshold: float = 400.0
    default_contact_stiffness: ContactStiffness = "stiff"
    #: Physics timestep (s) under ``contact_model="moreau"`` when ``physics_dt`` is not
    #: given; None keeps the MJCF file's.
    moreau_physics_dt: Optional[float] = None
    #: ``default_force_threshold`` (N) under ``contact_model="moreau"``, whose impacts are
    #: softer than MuJoCo's (measured per task); None keeps ``default_force_threshold``.
    moreau_force_threshold: Optional[float] = None

    def __init__(
        self,
        *,
        config: Optional[Dict[str, Any]] = None,
        contact_stiffness: Optional[ContactStiffness] = None,
        estimator: str = "bcg",
        bundle: Optional[BundleConfig] = None,
        backend: str = "mjx",
        physics_dt: Optional[float] = None,
        contact_model: str = "mujoco",
        kappa: Optional[float] = None,
        contact_options: Optional[Dict[str, Any]] = None,
        randomize: Optional[str] = None,
        randomization_fn: Optional[RandomizationFn] = None,
    ) -> None:
        if backend != "mjx":
            raise ValueError(f"backend must be 'mjx' for the JAX API, got {backend!r}")
        if bundle is not None and not isinstance(bundle, BundleConfig):
            raise ValueError(f"bundle must be a BundleConfig or None, got {type(bundle).__name__}")
        if contact_model not in CONTACT_MODELS:
            raise ValueError(f"contact_model must be one of {CONTACT_MODELS}, got {contact_model!r}")
        if kappa is not None and contact_model not in KAPPA_MODELS:
            raise ValueError(
                "kappa is the sharpness of the penalty and Moreau contact models; pass "
                "contact_model='penalty' or contact_model='moreau' with it"
            )
        if contact_options is not None and contact_model not in KAPPA_MODELS:
            raise ValueError("contact_options parametrize contact_model='penalty' or 'moreau'")
        if randomize not in RANDOMIZE:
            raise ValueError(f"randomize must be one of {RANDOMIZE}, got {randomize!r}")
        if randomization_fn is not None and not callable(randomization_fn):
            raise ValueError(
                f"randomization_fn must be callable (model, rng) -> (model, in_axes), got {randomization_fn!r}"
            )
        if randomization_fn is not None and randomize is None:
            raise ValueError("randomization_fn is drawn at every reset; pass randomize='episode' with it")
        self.config = merge_config(self.default_config(), config)
        #: ``"episode"``: ``reset`` draws the model fields of ``randomization_fn`` (see
        #: ``reset``); None: every episode steps the model as built.
        self.randomize = randomize
        self.contact_model = contact_model
        penalty = moreau = None
        if contact_model in KAPPA_MODELS:
            if contact_stiffness is not None:
                raise ValueError(
                    f"contact_stiffness sets MuJoCo's soft contact; with contact_model={contact_model!r} use kappa"
                )
            self.contact_stiffness = None
            params = _contact_params(
                PenaltyContact if contact_model == "penalty" else MoreauContact, kappa, contact_options
            )
            if contact_model == "penalty":
                penalty = params
            else:
                moreau = params
                physics_dt = self.moreau_physics_dt if physics_dt is None else physics_dt
                if self.moreau_force_threshold is not None:
                    self.default_force_threshold = self.moreau_force_threshold
        else:
            self.contact_stiffness = contact_stiffness or self.default_contact_stiffness
        mj_model = load_model(self.xml_path, self.contact_stiffness, physics_dt=physics_dt, contact_model=contact_model)
        self.customize_model(mj_model)
        substeps = round(self.config["ctrl_dt"] / mj_model.opt.timestep)
        if substeps < 1 or abs(substeps * mj_model.opt.timestep - self.config["ctrl_dt"]) > 1e-9:
            raise ValueError(
                f"config['ctrl_dt'] ({self.config['ctrl_dt']} s) must be a multiple of the physics "
                f"timestep ({mj_model.opt.timestep} s; physics_dt)"
            )
        self.physics = Physics(mj_model, substeps, penalty, moreau)
        #: The randomization function drawn at every reset (``randomize="episode"``), else None.
        self.randomization_fn: Optional[RandomizationFn] = None
        if randomize == "episode":
            self.randomization_fn = randomization_fn or self.default_randomization_fn()
            if self.randomization_fn is None:
                raise ValueError(
                    f"randomize='episode': {type(self).__name__} has no randomization of its own; "
                    "pass randomization_fn=fn(model, rng) -> (model, in_axes)"
                )
        #: The default estimator's name (``make_jax(..., estimator=...)``, checked here).
        self.estimator: str = resolve(estimator).name
        self.bundle = (bundle or BundleConfig()).with_defaults(self.default_force_threshold)
        self._steppers: Dict[Tuple[Estimator, BundleConfig, str], DifferentiableStep] = {}
        self.stepper()

    # ----- what a task provides -----------------------------------------------------
    @staticmethod
    @abc.abstractmethod
    def default_config() -> Dict[str, Any]:
        """Task configuration: ``ctrl_dt``, ``episode_length``, ``reward_weights``, ..."""

    def customize_model(self, model: mujoco.MjModel) -> None:
        """Hook to edit the compiled model before MJX sees it."""

    def default_randomization_fn(self) -> Optional[RandomizationFn]:
        """The task's own per-episode randomization (``randomize="episode"`` without a
        ``randomization_fn``), in MuJoCo Playground's shape (``physics.model_fields``); None
        here: the task has none."""
        return None

    #: Camera used by ``render`` (name or id; -1 is the free camera).
    render_camera: Any = -1

    def decorate(self, mj_data: mujoco.MjData, info: Dict[str, Any]) -> None:
        """Hook to show task info (goal markers) in a rendered ``MjData``."""

    @abc.abstractmethod
    def initial_state(self, key: jax.Array) -> Tuple[jax.Array, jax.Array, Dict[str, jax.Array]]:
        """(qpos, qvel, task info such as the goal) of a new episode."""

    @abc.abstractmethod
    def observe(self, data: mjx.Data, info: Dict[str, Any]) -> jax.Array:
        """Observation of ``data`` (a smooth function of the state)."""

    @abc.abstractmethod
    def reward_terms(
        self, prev: mjx.Data, action: jax.Array, data: mjx.Data, info: Dict[str, Any]
    ) -> Dict[str, jax.Array]:
        """Unweighted reward terms; weights live in ``config['reward_weights']``."""

    @abc.abstractmethod
    def terminated(self, data: mjx.Data, info: Dict[str, Any]) -> jax.Array:
        """Whether ``data`` ends the episode (e.g. object dropped, robot fell)."""

    @abc.abstractmethod
    def action_to_ctrl(self, action: jax.Array) -> jax.Array:
        """Map the normalized action in [-1, 1] to MuJoCo ``ctrl``."""

    @abc.abstractmethod
    def success(self, data: mjx.Data, info: Dict[str, Any]) -> jax.Array:
        """Whether ``data`` solves the task (bool scalar), stored as ``info["is_success"]``.

        Called after the physics with the new data and the updated info (``step`` and
        ``truncated`` already advanced); a diverged step reports False regardless.
        """

    def physics_action(self, action: jax.Array, info: Dict[str, Any]) -> jax.Array:
        """The action ``action_to_ctrl`` maps, from the policy's clipped action and the
        state's info before the step; the identity here. A task whose actions are relative
        to a state-dependent reference (G1's residuals around the reference pose) overrides
        it; the base differentiates through it (``grad_step``'s ``B`` is chained), and
        bundle perturbations of the action (``action_sigma``) act on its output."""
        return action

    def update_info(self, prev: mjx.Data, data: mjx.Data, info: Dict[str, Any]) -> Dict[str, Any]:
        """Per-step update of task entries of ``info`` (episode accumulators); identity here.

        Called after the physics and before ``reward_terms``, ``terminated`` and ``success``,
        on both backends; return a new dict (same keys, shapes and dtypes).
        """
        return info

    # ----- sizes ------------------------------------------------------------------------
    @property
    def mj_model(self) -> mujoco.MjModel:
        return self.physics.mj_model

    @property
    def dt(self) -> float:
        return self.physics.dt

    @property
    def action_size(self) -> int:
        return int(self.mj_model.nu)

    @property
    def state_size(self) -> int:
        return 2 * int(self.mj_model.nv) + int(self.mj_model.na)

    @functools.cached_property
    def observation_size(self) -> int:
        """Length of the observation vector, read from ``reset``'s shapes without starting
        JAX's runtime (``mjx_private.abstract_model``): building an env and reading its spaces stays
        fork-safe."""

        def reset_on(model: mjx.Model, key: jax.Array) -> State:
            env = copy.copy(self)
            env.physics = self.physics.for_shapes(model)
            env._steppers = {}  # built on the abstract model, kept from this env's cache
            return env.reset(key)

        model = mjx_private.abstract_model(self.mj_model)
        with mjx_private.without_device():
            state = jax.eval_shape(reset_on, model, jax.ShapeDtypeStruct((2,), jnp.uint32))
        return int(state.obs.shape[-1])

    @property
    def episode_length(self) -> int:
        return int(self.config["episode_length"])

    @property
    def unwrapped(self) -> "MjxEnv":
        return self

    # ----- the functional API -------------------------------------------------------------
    def stepper(
        self,
        estimator: Optional[Union[str, Estimator]] = None,
        bundle: Optional[BundleConfig] = None,
        backward: str = "vjp",
    ) -> DifferentiableStep:
        """The differentiable step for an estimator (a name, or its ``Estimator``; None: the
        env's) and bundle (cached). ``backward="jacobians"`` gives the step whose backward
        pass applies full transposed Jacobians (a reference and benchmark baseline;
        ``"vjp"``, reverse mode, is what training uses)."""
        estimator = resolve(estimator or self.estimator)
        if bundle is not None and not isinstance(bundle, BundleConfig):
            raise ValueError(f"bundle must be a BundleConfig or None, got {type(bundle).__name__}")
        bundle = (bundle or self.bundle).with_defaults(self.default_force_threshold)
        key = (estimator, bundle, backward)
        if key not in self._steppers:
            self._steppers[key] = DifferentiableStep(self.physics, self.action_to_ctrl, estimator, bundle, backward)
        return self._steppers[key]

    def with_contact_stiffness(self, value: float | jax.Array) -> "MjxEnv":
        """A copy of this env with another contact stiffness: ``kappa`` (1/m) under the
        penalty and Moreau models, the ``solref`` time constant (s) under MuJoCo's. ``value`` may be a
        traced scalar (call it inside ``jit``), so that one compiled program serves a whole
        stiffness sweep instead of one program per level."""
        new = copy.copy(self)
        new.physics = self.physics.with_contact_stiffness(value)
        new._steppers = {}
        if not isinstance(value, jax.core.Tracer):
            new.contact_stiffness = None if self.contact_model in KAPPA_MODELS else float(value)
        return new

    def reset(self, rng: jax.Array) -> State:
        """A new episode. With ``randomize="episode"`` it also draws the episode's model:
        ``randomization_fn(model, key[None])`` (MuJoCo Playground's shape, one key), whose
        randomized fields (those its ``in_axes`` marks 0) the state keeps in ``info`` as
        ``"model/<field>"`` entries; ``step`` substitutes them into the MJX model
        (``physics_of``). The model lives in the state rather than in a vmapped model
        argument, so each element of a batch steps its own model, an autoreset (a fresh
        ``reset``) redraws it, and every consumer of ``reset``/``step`` (Gymnasium envs,
        learners, ``jax.grad`` through ``step``) works unchanged. The fields are constants
        to the step's derivative rules."""
        rng, key = jax.random.split(rng)
        qpos, qvel, task_info = self.initial_state(key)
        if self.randomization_fn is not None:
            fields = model_fields.draw_fields(self.randomization_fn, self.physics.model, jax.random.fold_in(key, 1))
            task_info = {**task_info, **model_fields.as_info(fields)}
        return self.state_from(qpos, qvel, None, task_info, rng)

    def physics_of(self, info: Dict[str, Any]) -> Physics:
        """The physics of the episode whose state info is ``info``: this env's, with the
        episode's model fields (``"model/<field>"`` entries, ``randomize="episode"``) in
        its MJX model."""
        fields = model_fields.from_info(info)
        return self.physics if fields is None else self.physics.with_model_fields(fields)

    def _episode_stepper(self, stepper: DifferentiableStep, info: Dict[str, Any]) -> DifferentiableStep:
        """``stepper`` on the episode's physics (``physics_of``)."""
        fields = model_fields.from_info(info)
        return stepper if fields is None else stepper.at_traced((stepper.physics.traced_stiffness, fields))

    def state_from(self, qpos, qvel, act, task_info: Dict[str, Any], rng: jax.Array) -> State:
        """A fresh state at (qpos, qvel, act) with the given task info (goal, ...; an
        episode's ``"model/<field>"`` entries set its model)."""
        # make_data runs mjx.forward: kinematics and com_pos are already those of qpos
        data = self.physics_of(task_info).make_data(jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32), act)
        info = {
            "rng": rng,
            **{k: jnp.asarray(value, dtype) for k, (dtype, value) in STEP_INFO.items()},
            **task_info,
        }
        stepper = self.stepper()
        if stepper.branching:  # bcg branch rollouts: the branch states travel with the state
            branches = stepper.empty_branches()
            info.update(dict(zip(BRANCH_INFO, branches)))
        metrics = {f"reward/{k}": jnp.zeros(()) for k in self.config["reward_weights"]}
        metrics["is_success"] = jnp.zeros(())
        return State(data, self.observe(data, info), jnp.zeros(()), jnp.zeros(()), metrics, info)

    def reward(self, prev: mjx.Data, action: jax.Array, data: mjx.Data, info: Dict[str, Any]):
        terms = self.reward_terms(prev, action, data, info)
        weights = self.config["reward_weights"]
        weighted = {k: weights[k] * terms[k] for k in weights}
        return sum(weighted.values()), weighted

    def step(self, state: State, action: jax.Array) -> State:
        """One control step; differentiable through ``state.data`` and ``action``."""
        return self._step(state, action, self.stepper())

    def step_with(self, stepper: DifferentiableStep, state: State, action: jax.Array) -> State:
        """``step`` whose backward pass is ``stepper``'s (from ``self.stepper(...)``):
        another estimator, bundle or backward pass than the env's default."""
        return self._step(state, action, stepper)

    def plain_step(self, state: State, action: jax.Array) -> State:
        """``step``'s next state, observation, reward and info without the estimator's
        derivative rules or ``bcg``'s branch rollouts (the branch entries come back empty
        and ``bundle_dropped`` 0). It compiles to about half of ``step``'s program on G1.
        What the Gymnasium envs (``backend="mjx"``) step, which never differentiate a
        rollout; differentiating it gives plain reverse mode, not the estimator."""
        return self._step(state, action, self.stepper(), plain=True)

    def _step(self, state: State, action: jax.Array, stepper: DifferentiableStep, plain: bool = False) -> State:
        """One step with ``stepper`` on the episode's physics: differentiable, or its
        ``plain`` values."""
        stepper = self._episode_stepper(stepper, state.info)
        advance = stepper.plain if plain else stepper
        action = jnp.clip(action, -1.0, 1.0)
        rng, key = jax.random.split(state.info["rng"])
        carried = BRANCH_INFO[0] in state.info
        if stepper.branching and not carried:
            raise ValueError(
                f"this stepper rolls bcg branches (horizon {stepper.config.horizon}) but the state "
                "carries none; make the env with the same estimator and bundle "
                "(make_jax(id, estimator=..., bundle=...))"
            )
        branches = Branches(*(state.info[k] for k in BRANCH_INFO)) if carried else None
        result = advance(
            state.data, self.physics_action(action, state.info), key, state.info["bundle_window"], branches
        )
        diverged = divergence.diverged(result.data.qpos, result.data.qvel, result.data.act, xp=jnp)
        data = jax.tree.map(lambda new, old: jnp.where(diverged, old, new), result.data, state.data)
        info = dict(state.info)
        info.update(
            rng=rng,
            step=state.info["step"] + 1,
            bundle_window=jnp.where(diverged, 0, result.bundle_window),
            bundled=result.bundled,
            sim_diverged=diverged,
            max_contact_force=jnp.max(result.contact_force, initial=0.0),
            max_contact_rise=jnp.max(result.contact_rise, initial=0.0),
            max_point_force=jnp.max(result.point_force, initial=0.0),
            # branches dropped by a branch rollout; grad_step overwrites it and bundle_alpha
            bundle_dropped=jnp.asarray(result.stats.get("bundle_dropped", 0), jnp.int32),
            bundle_alpha=jnp.ones((), jnp.float32),
        )
        if carried:
            info.update(dict(zip(BRANCH_INFO, (result.branches.z, result.branches.valid & ~diverged))))
        obs, reward, done, info, weighted = self.finish_step(state.data, action, data, info)
        metrics = dict(state.metrics)
        metrics.update({f"reward/{k}": v for k, v in weighted.items()})
        metrics["is_success"] = info["is_success"].astype(jnp.float32)
        return state.replace(
            data=data, obs=obs, reward=reward, done=done.astype(jnp.float32), metrics=metrics, info=info
        )

    def finish_step(self, prev: mjx.Data, action: jax.Array, data: mjx.Data, info: Dict[str, Any]):
        """The task's side of a step, after the physics, shared by both backends (MJX here,
        MuJoCo C through ``mujoco_backend.TaskProgram``): ``update_info``; the reward,
        0 on a diverged step; ``truncated`` (``step >= episode_length``); ``done`` =
        diverged or ``terminated``; ``is_success``, never on a diverged step; the
        observation. ``info`` already holds the physics' entries of this step (``step``
        advanced, ``sim_diverged``, contact forces). Pure: returns ``(obs, reward, done,
        info, weighted reward terms)``."""
        diverged = jnp.asarray(info["sim_diverged"], bool)
        info = dict(self.update_info(prev, data, dict(info)))
        reward, weighted = self.reward(prev, action, data, info)
        reward = jnp.where(diverged, 0.0, reward)
        info["truncated"] = info["step"] >= self.episode_length
        done = diverged | self.terminated(data, info)
        info["is_success"] = ~diverged & jnp.asarray(self.success(data, info), bool)
        return self.observe(data, info), reward, done, info, weighted

    def grad_step(
        self,
        state: State,
        action: jax.Array,
        estimator: Optional[Union[str, Estimator]] = None,
        bundle: Optional[BundleConfig] = None,
    ) -> Tuple[State, Jacobians]:
        """``step`` plus the step's Jacobians from ``estimator``."""
        stepper = self.stepper(estimator, bundle)
        next_state = self._step(state, action, stepper)
        stepper = self._episode_stepper(stepper, state.info)
        physics = stepper.physics
        _, key = jax.random.split(state.info["rng"])
        data0 = state.data
        clipped = jnp.clip(action, -1.0, 1.0)
        u = self.physics_action(clipped, state.info)
        (_, _, _), (A, B), stats = stepper.jacobians(data0, u, key, state.info["bundle_window"])
        B = B @ jax.jacfwd(self.physics_action)(clipped, state.info)  # d x'/d a = d x'/d u  d u/d a
        in_box = (jnp.abs(action) <= 1.0).astype(B.dtype)
        B = B * in_box[None, :]
        data1 = next_state.data

        def reward_fn(dx0, a, dx1):
            d0 = refresh(physics, stepper.displace(data0, dx0))
            d1 = refresh(physics, stepper.displace(data1, dx1))
            return self.reward(d0, jnp.clip(a, -1.0, 1.0), d1, next_state.info)[0]

        zx = jnp.zeros(self.state_size)
        g0, ga, g1 = jax.grad(reward_fn, argnums=(0, 1, 2))(zx, action, zx)
        C = jax.jacfwd(lambda dx: self.observe(refresh(physics, stepper.displace(data1, dx)), next_state.info))(zx)
        jac = Jacobians(A=A, B=B, r_x=g0 + A.T @ g1, r_a=ga + B.T @ g1, C=C)
        diverged = next_state.info["sim_diverged"]
        jac = jax.tree.map(lambda j: jnp.where(diverged, jnp.zeros_like(j), j), jac)
        info = dict(next_state.info)
        info.update(
            bundle_dropped=jnp.asarray(stats["bundle_dropped"], jnp.int32),
            bundle_alpha=jnp.asarray(stats["alpha"], jnp.float32),
        )
        return next_state.replace(info=info), jac
