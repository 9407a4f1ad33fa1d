"""``TaskSpec``: what the MuJoCo C backend takes from a task.

The C backend simulates the task's ``MjModel`` in MuJoCo C and evaluates the task's pure
JAX functions (initial state, action maps, ``finish_step``) on data read from C. It needs
nothing else of the JAX env: not its ``DifferentiableStep``s, nor a traced ``reset``
(which runs ``mjx.forward``; the info entries' shapes come from ``initial_state`` and
``STEP_INFO`` instead).

The task functions are methods of a task instance (they read what the task's constructor
set up: body and site ids, a reference motion, ``self.physics`` for contact forces), so a
spec is taken from a built task (``from_env``) or builds one (``make``); ``task`` keeps it
for the Gymnasium layer (spaces, rendering).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, List, Mapping, Optional

import jax
import mujoco
import numpy as np

from bcg_envs.envs.base import STEP_INFO, MjxEnv
from bcg_envs.gradients.config import BundleConfig
from bcg_envs.physics import model_fields
from bcg_envs.registry import make_jax


@dataclasses.dataclass(frozen=True, eq=False)
class TaskSpec:
    """One task's configuration and pure functions, as the C backend uses them."""

    env_name: str
    task_class: type
    #: The task's merged ``config`` (``ctrl_dt``, ``episode_length``, ``reward_weights``, ...).
    config: Mapping[str, Any]
    #: The model to simulate (contact stiffness and task edits applied).
    mj_model: mujoco.MjModel
    #: Physics substeps per control step.
    n_substeps: int
    #: Default estimator and bundle of ``grad_step``.
    estimator: str
    bundle: BundleConfig
    #: Default ``BundleConfig.force_threshold`` of the task, N.
    default_force_threshold: float
    #: ``key -> (qpos, qvel, task info)`` of a new episode.
    initial_state: Callable[[jax.Array], Any]
    #: ``(prev, action, data, info) -> (obs, reward, done, info, weighted terms)``.
    finish_step: Callable[..., Any]
    #: ``action -> ctrl``.
    action_to_ctrl: Callable[[jax.Array], jax.Array]
    #: ``(clipped action, info) -> physics action``; None where it is the identity.
    physics_action: Optional[Callable[[jax.Array, Dict[str, Any]], jax.Array]]
    #: Whether the task updates its own info entries each step (``update_info``).
    updates_info: bool
    #: The task instance the functions belong to.
    task: MjxEnv
    #: ``key -> model fields`` of a new episode (``randomize="episode"``: the task's
    #: ``randomization_fn`` drawn on its MJX model, ``model_fields.draw_fields``); None where
    #: every episode steps ``mj_model`` as built.
    draw_model: Optional[Callable[[jax.Array], Dict[str, jax.Array]]] = None

    @classmethod
    def from_env(cls, env_name: str, env: MjxEnv) -> "TaskSpec":
        """The spec of a built task (its config, model, contact stiffness, timestep)."""
        check_contact_model(env.contact_model)
        kind = type(env)
        return cls(
            env_name=env_name,
            task_class=kind,
            config=env.config,
            mj_model=env.mj_model,
            n_substeps=int(env.physics.n_substeps),
            estimator=env.estimator,
            bundle=env.bundle,
            default_force_threshold=float(env.default_force_threshold),
            initial_state=env.initial_state,
            finish_step=env.finish_step,
            action_to_ctrl=env.action_to_ctrl,
            physics_action=None if kind.physics_action is MjxEnv.physics_action else env.physics_action,
            updates_info=kind.update_info is not MjxEnv.update_info,
            task=env,
            draw_model=None if env.randomization_fn is None else functools.partial(draw_episode_fields, env),
        )

    @classmethod
    def make(cls, env_name: str, env_kwargs: Mapping[str, Any]) -> "TaskSpec":
        """The spec of ``env_name`` made with ``env_kwargs`` (``make_jax``'s arguments)."""
        check_contact_model(env_kwargs.get("contact_model", "mujoco"))
        return cls.from_env(env_name, make_jax(env_name, **env_kwargs))

    @property
    def episode_length(self) -> int:
        """Control steps per episode."""
        return int(self.config["episode_length"])

    @property
    def reward_keys(self) -> List[str]:
        """Names of the weighted reward terms."""
        return list(self.config["reward_weights"])

    @functools.cached_property
    def info_spec(self) -> Dict[str, jax.ShapeDtypeStruct]:
        """Shape and dtype of every info entry of a state (``MjxEnv.state_from``:
        ``STEP_INFO`` and the task's own) but ``rng`` and the bcg branch entries, keys
        sorted (pytree order)."""
        task_info = jax.eval_shape(self.initial_state, jax.random.PRNGKey(0))[2]
        spec = {k: jax.ShapeDtypeStruct((), np.dtype(dtype)) for k, (dtype, _) in STEP_INFO.items()}
        spec.update({k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in task_info.items()})
        return dict(sorted(spec.items()))


def draw_episode_fields(env: MjxEnv, key: jax.Array) -> Dict[str, jax.Array]:
    """The model fields of one episode of ``env`` (``randomize="episode"``), drawn from its
    MJX model at call time (reading ``env.physics.model`` starts JAX's runtime)."""
    return model_fields.draw_fields(env.randomization_fn, env.physics.model, key)


def check_contact_model(contact_model: str) -> None:
    """MuJoCo C simulates MuJoCo's own contact model only."""
    if contact_model != "mujoco":
        raise ValueError(
            f"contact_model={contact_model!r} runs on the MJX backend only "
            "(backend='mjx'); MuJoCo C simulates contact_model='mujoco'"
        )
