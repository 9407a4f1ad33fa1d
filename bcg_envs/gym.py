"""The Gymnasium envs of every task, over either physics backend.

``GymEnv`` is one environment (``gym.make("bcg_envs/BoxPush-v0", backend=...)``) and
``GymVectorEnv`` a batch with same-step autoreset (``gym.make_vec(..., num_envs=N)``), both
with ``grad_step``. They own the Gymnasium contract (spaces, seeding, argument checks, the
reset guard, rendering) and leave the physics to a ``Simulation`` (``BatchSimulation``):
``bcg_envs.mjx_backend`` steps the JAX env's jitted functions (``backend="mjx"``, the
default), ``bcg_envs.mujoco_backend`` steps its model in MuJoCo C (``backend="mujoco"``).
Episodes truncate inside the environment after ``episode_length`` steps
(``info["truncated"]``), so ``step`` and ``grad_step`` count steps the same way.
"""

from __future__ import annotations

import atexit
import functools
import math
import numbers
import weakref
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional, Protocol, Tuple, Union

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from bcg_envs.envs.base import OBS_BOUND, Jacobians, MjxEnv
from bcg_envs.gradients.config import BundleConfig
from bcg_envs.gradients.registry import Estimator, resolve
from bcg_envs.mjx_backend import MjxBatchSimulation, MjxSimulation
from bcg_envs.process_safety import check_process
from bcg_envs.registry import make_jax

if TYPE_CHECKING:
    import mujoco
    from mujoco import mjx
    from numpy.typing import ArrayLike

#: The physics backends: ``"mjx"`` (jitted JAX, float32) and ``"mujoco"`` (MuJoCo C, float64).
BACKENDS = ("mjx", "mujoco")


class GradStepResult(NamedTuple):
    """What ``grad_step`` returns: ``step``'s five values plus the Jacobians."""

    observation: np.ndarray
    reward: Any
    terminated: Any
    truncated: Any
    info: Dict[str, Any]
    jacobians: Jacobians


class EnvState(tuple):
    """What ``GymEnv.get_state`` returns: the tuple ``(qpos, qvel, act)`` (NumPy copies),
    with the episode step counter (``info["step"]``, control steps since reset) as the
    attribute ``step``, outside the tuple (as ``os.stat_result`` keeps fields beyond its
    tuple). Restore both with ``env.set_state(*state, step=state.step)``."""

    def __new__(cls, qpos: np.ndarray, qvel: np.ndarray, act: np.ndarray, step: int) -> "EnvState":
        self = super().__new__(cls, (qpos, qvel, act))
        self.step = int(step)
        return self

    def __getnewargs__(self):
        return (*self, self.step)

    @property
    def qpos(self) -> np.ndarray:
        return self[0]

    @property
    def qvel(self) -> np.ndarray:
        return self[1]

    @property
    def act(self) -> np.ndarray:
        return self[2]

    def __repr__(self) -> str:
        return f"EnvState(qpos={self[0]!r}, qvel={self[1]!r}, act={self[2]!r}, step={self.step})"


def check_step_count(step: Any) -> int:
    """``set_state``'s ``step``: a non-negative integer (not a bool), returned as int."""
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, numbers.Integral) or not 0 <= int(step) < 2**31 - 1:
        raise ValueError(f"step must be a non-negative integer (the episode step counter, info['step']), got {step!r}")
    return int(step)


def _close_renderer(ref: "weakref.ref") -> None:
    """Close the renderer behind ``ref`` if it is still alive."""
    renderer = ref()
    if renderer is not None:
        renderer.close()


def render_state(
    renderer: mujoco.Renderer,
    jax_env: MjxEnv,
    state: Tuple[np.ndarray, np.ndarray, np.ndarray],
    info: Dict[str, Any],
) -> np.ndarray:
    """One RGB frame of ``state = (qpos, qvel, act)`` with the task's decorations (goal
    markers from ``info``), from the task's ``render_camera``."""
    import mujoco

    mj_data = mujoco.MjData(renderer.model)
    qpos, qvel, act = state
    mj_data.qpos[:], mj_data.qvel[:] = qpos, qvel
    if act.size:
        mj_data.act[:] = act
    jax_env.decorate(mj_data, {k: np.asarray(v) for k, v in info.items()})
    mujoco.mj_forward(renderer.model, mj_data)
    renderer.update_scene(mj_data, camera=jax_env.render_camera)
    return renderer.render().copy()


#: Action dtypes of ``check_action``'s fast path (the policies' usual ones).
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_action(action: Any, shape: tuple, name: str = "action") -> np.ndarray:
    """Validate an action (shape, real dtype, finite) and return it as float32 (a copy)."""
    if type(action) is np.ndarray and action.dtype in _FLOAT_DTYPES and action.shape == shape and action.size <= 64:
        # Fast path of a small float array of the right shape: only the finiteness check,
        # on Python floats (a NumPy ufunc call costs ~10 us between MuJoCo steps, whose
        # work evicts its code and data from the caches; this ~1 us).
        values = action.tolist() if len(shape) == 1 else action.ravel().tolist()
        if all(map(math.isfinite, values)):
            return action.astype(np.float32)
    arr = np.asarray(action)
    if (
        arr.dtype == object
        or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer))
        or arr.dtype == bool
    ):
        raise ValueError(f"{name} must be a real-valued array of shape {shape}, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or inf), got {arr}")
    return arr.astype(np.float32)


def task_spaces(jax_env: MjxEnv) -> Tuple[spaces.Box, spaces.Box]:
    """One env's (observation, action) spaces: observations within +-OBS_BOUND, actions in [-1, 1]."""
    return (
        spaces.Box(-OBS_BOUND, OBS_BOUND, (jax_env.observation_size,), np.float32),
        spaces.Box(-1.0, 1.0, (jax_env.action_size,), np.float32),
    )


def _check_vector(value, size: int, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def _check_gradient_options(estimator: Optional[str], bundle: Optional[BundleConfig], default: Estimator) -> Estimator:
    """``grad_step``'s ``Estimator`` (``default`` if None) after checking it and ``bundle``:
    the name is checked here, once; the simulations below take the object."""
    if bundle is not None and not isinstance(bundle, BundleConfig):
        raise ValueError(f"bundle must be a BundleConfig or None, got {type(bundle).__name__}")
    return resolve(estimator or default)


# ----- what a physics backend provides -----------------------------------------------
StepOutputs = Tuple[Any, Any, Any, Any, Dict[str, Any]]


class Simulation(Protocol):
    """One env's physics behind ``GymEnv``. ``reset`` draws from the Gym env's
    ``np_random``; ``step``/``grad_step`` take a checked float32 action and return NumPy
    ``(obs, reward, terminated, truncated, info)`` (``grad_step`` adds the ``Jacobians``)."""

    jax_env: MjxEnv
    default_estimator: Estimator
    model: Any
    data: Any

    def reset(self, rng: np.random.Generator) -> Tuple[np.ndarray, Dict[str, Any]]: ...
    def step(self, action: np.ndarray) -> StepOutputs: ...
    def grad_step(self, action: np.ndarray, estimator: Estimator, bundle: Optional[BundleConfig]) -> tuple: ...
    def get_state(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]: ...
    def set_state(self, qpos: np.ndarray, qvel: np.ndarray, act: Optional[np.ndarray], step: Optional[int]) -> None: ...
    def task_info(self) -> Optional[Dict[str, Any]]: ...
    def close(self) -> None: ...


class BatchSimulation(Protocol):
    """``num_envs`` envs' physics behind ``GymVectorEnv``, with same-step autoreset: the
    batched outputs of the step, then the new episodes' observations where one ended (the
    ended ones in ``info["final_obs"]``, mask ``info["_final_obs"]``). ``reset`` keeps
    ``rng`` for the autoresets that follow."""

    jax_env: MjxEnv
    default_estimator: Estimator
    model: Any

    def reset(self, rng: np.random.Generator) -> Tuple[np.ndarray, Dict[str, Any]]: ...
    def step(self, actions: np.ndarray) -> StepOutputs: ...
    def grad_step(self, actions: np.ndarray, estimator: Estimator, bundle: Optional[BundleConfig]) -> tuple: ...
    def close(self) -> None: ...


def make_simulation(env_name: str, backend: str, jax_env: Optional[MjxEnv], env_kwargs: Dict[str, Any]) -> Simulation:
    """The ``Simulation`` of ``backend`` for ``env_name`` (``jax_env`` or one made from
    ``env_kwargs``)."""
    _check_backend(backend)
    check_process(env_name)
    if jax_env is not None and env_kwargs:
        raise ValueError(f"give either jax_env or env keyword arguments, not both (got {sorted(env_kwargs)})")
    if backend == "mujoco":
        from bcg_envs.mujoco_backend.envs import MujocoSimulation

        return MujocoSimulation(env_name, env_kwargs, jax_env=jax_env)
    return MjxSimulation(jax_env if jax_env is not None else make_jax(env_name, **env_kwargs))


def make_batch_simulation(env_name: str, num_envs: int, backend: str, env_kwargs: Dict[str, Any]) -> BatchSimulation:
    """The ``BatchSimulation`` of ``backend`` for ``num_envs`` copies of ``env_name``."""
    _check_backend(backend)
    if backend == "mujoco":
        from bcg_envs.mujoco_backend.envs import MujocoBatchSimulation

        return MujocoBatchSimulation(env_name, num_envs, env_kwargs)
    return MjxBatchSimulation(make_jax(env_name, **env_kwargs), num_envs)


# ----- the Gymnasium envs ----------------------------------------------------------------
class GymEnv(gymnasium.Env):
    """A bcg_envs task as a Gymnasium environment (NumPy in and out) over ``backend``:
    ``"mjx"`` (default) or ``"mujoco"`` (MuJoCo C, float64 physics). Both give the same
    spaces, info keys, truncation, reset distribution, divergence handling and
    ``grad_step`` contract; the C backend's Jacobians are finite differences."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(
        self,
        env_name: str,
        *,
        render_mode: Optional[str] = None,
        width: int = 320,
        height: int = 240,
        backend: str = "mjx",
        jax_env: Optional[MjxEnv] = None,
        **env_kwargs: Any,
    ) -> None:
        """``jax_env``: simulate this already-built JAX env of ``env_name`` (its config,
        contact stiffness, timestep) instead of making one from ``env_kwargs``."""
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.simulation: Simulation = make_simulation(env_name, backend, jax_env, env_kwargs)
        self.env_name = env_name
        self.backend = backend
        self.jax_env = self.simulation.jax_env
        self.render_mode = render_mode
        self.metadata = dict(self.metadata, render_fps=int(round(1.0 / self.jax_env.dt)))
        self._size = (height, width)
        self._renderer = None
        self.observation_space, self.action_space = task_spaces(self.jax_env)

    @property
    def model(self) -> mujoco.MjModel:
        """The ``mujoco.MjModel`` simulated (contact stiffness applied)."""
        return self.simulation.model

    @property
    def data(self) -> Union[mujoco.MjData, mjx.Data]:
        """The live physics data: ``mujoco.MjData`` (MuJoCo C; read it, change the state
        through ``set_state``) or the current ``mjx.Data`` (MJX)."""
        self._require_reset()
        return self.simulation.data

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[np.ndarray, Dict[str, Any]]:
        super().reset(seed=seed)
        return self.simulation.reset(self.np_random)

    def step(self, action: ArrayLike) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        simulation = self.simulation
        if simulation.task_info() is None:  # ``_require_reset`` inlined: one call less per step
            self._require_reset()
        return simulation.step(check_action(action, self.action_space.shape))

    def grad_step(
        self, action: ArrayLike, estimator: Optional[str] = None, bundle: Optional[BundleConfig] = None
    ) -> GradStepResult:
        """``step`` plus the step's Jacobians, from ``estimator`` (the env's if None)."""
        self._require_reset()
        estimator = _check_gradient_options(estimator, bundle, self.simulation.default_estimator)
        action = check_action(action, self.action_space.shape)
        return GradStepResult(*self.simulation.grad_step(action, estimator, bundle))

    def get_state(self) -> EnvState:
        """``(qpos, qvel, act)`` as NumPy arrays (copies); the result's ``step`` attribute
        is the episode step counter, which ``set_state(*state, step=state.step)`` restores."""
        self._require_reset()
        return EnvState(*self.simulation.get_state(), step=int(self.simulation.task_info()["step"]))

    def set_state(
        self, qpos: ArrayLike, qvel: ArrayLike, act: Optional[ArrayLike] = None, *, step: Optional[int] = None
    ) -> None:
        """Set the simulator state within the current episode: the task info (goal, ...)
        is kept. ``step`` sets the episode step counter (``info["step"]``, which
        truncates the episode at ``episode_length``); ``None`` keeps the current count.
        Give ``step`` when going back to an earlier state, e.g. before each of several
        ``grad_step`` calls from one state, so that the episode counts one step, not one
        per call."""
        self._require_reset()
        m = self.model
        qpos, qvel = _check_vector(qpos, m.nq, "qpos"), _check_vector(qvel, m.nv, "qvel")
        act = None if act is None else _check_vector(act, m.na, "act")
        self.simulation.set_state(qpos, qvel, act, None if step is None else check_step_count(step))

    def task_info(self) -> Dict[str, Any]:
        """The episode's task info (goal, target, clip phase, step count, ...), as the
        simulation holds it."""
        self._require_reset()
        return self.simulation.task_info()

    def render(self) -> Optional[np.ndarray]:
        if self.render_mode != "rgb_array":
            return None
        self._require_reset()
        import mujoco

        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, *self._size)
            # Registered after the renderer's GL context (and MuJoCo's own exit hook that
            # terminates the EGL display), so it runs before that hook: a script that never
            # closes the env ends without ``Renderer.__del__`` errors at shutdown.
            self._close_at_exit = functools.partial(_close_renderer, weakref.ref(self._renderer))
            atexit.register(self._close_at_exit)
        return render_state(self._renderer, self.jax_env, self.get_state(), self.simulation.task_info())

    def close(self) -> None:
        if self._renderer is not None:
            atexit.unregister(self._close_at_exit)
            self._renderer.close()
            self._renderer = None
        self.simulation.close()

    def _require_reset(self) -> None:
        if self.simulation.task_info() is None:
            raise RuntimeError(f"{self.env_name}: call reset() before step(), grad_step() or state access")


class GymVectorEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` copies of a task over ``backend`` with same-step autoreset: MJX steps
    them in one ``jax.vmap`` call, MuJoCo C in one multi-threaded ``mujoco.rollout`` call.

    When an episode ends, ``step`` returns the new episode's first observation and puts
    the last one in ``info["final_obs"]`` (mask ``info["_final_obs"]``). ``info`` holds
    the step's own values for every env, ended ones included; ``info["final_info"]`` repeats
    the ended envs' values in Gymnasium's layout (each key with its ``_key`` mask; mask
    ``info["_final_info"]``), as Gymnasium's own vector envs give them.
    """

    metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}

    def __init__(
        self,
        env_name: str,
        num_envs: int,
        *,
        render_mode: Optional[str] = None,
        backend: str = "mjx",
        **env_kwargs: Any,
    ):
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if render_mode is not None:
            raise ValueError("GymVectorEnv does not render; use render_mode=None")
        self.simulation: BatchSimulation = make_batch_simulation(env_name, num_envs, backend, env_kwargs)
        self.env_name = env_name
        self.backend = backend
        self.jax_env: MjxEnv = self.simulation.jax_env
        self.num_envs = num_envs
        self.render_mode = None
        self.single_observation_space, self.single_action_space = task_spaces(self.jax_env)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._started = False

    @property
    def model(self) -> mujoco.MjModel:
        """The ``mujoco.MjModel`` simulated (contact stiffness applied)."""
        return self.simulation.model

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[np.ndarray, Dict[str, Any]]:
        super().reset(seed=seed)
        out = self.simulation.reset(self.np_random)
        self._started = True
        return out

    def step(self, actions: ArrayLike) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        self._require_reset()
        return _with_final_info(self.simulation.step(check_action(actions, self.action_space.shape, "actions")))

    def grad_step(
        self, actions: ArrayLike, estimator: Optional[str] = None, bundle: Optional[BundleConfig] = None
    ) -> GradStepResult:
        """Batched ``grad_step``: every Jacobian gets a leading ``num_envs`` axis."""
        self._require_reset()
        estimator = _check_gradient_options(estimator, bundle, self.simulation.default_estimator)
        actions = check_action(actions, self.action_space.shape, "actions")
        obs, reward, terminated, truncated, info, jacobians = self.simulation.grad_step(actions, estimator, bundle)
        return GradStepResult(*_with_final_info((obs, reward, terminated, truncated, info)), jacobians)

    def close_extras(self, **kwargs: Any) -> None:
        self.simulation.close()

    def _require_reset(self) -> None:
        if not self._started:
            raise RuntimeError(f"{self.env_name}: call reset() before step() or grad_step()")


def _with_final_info(outputs: tuple) -> tuple:
    """A batched step's outputs with ``info["final_info"]``: the ended envs' step values,
    each key beside its ``_key`` mask, and ``info["_final_info"]`` (Gymnasium's layout)."""
    obs, reward, terminated, truncated, info = outputs
    ended = np.asarray(info["_final_obs"])
    final = {}
    for key, value in info.items():
        if key.startswith(("final_obs", "_final_obs")):
            continue
        final[key] = value
        final[f"_{key}"] = ended
    info["final_info"] = final
    info["_final_info"] = ended
    return obs, reward, terminated, truncated, info
