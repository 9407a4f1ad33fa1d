"""Gymnasium adapter: NumPy in and out over the JAX environments.

``GymEnv`` is one environment (``gym.make("bcg_envs/BoxPush-v0")``) and ``GymVectorEnv``
a batch stepped with ``jax.vmap`` (``gym.make_vec(..., num_envs=N)``), both with
``grad_step``. Episodes truncate inside the environment after ``episode_length`` steps
(``info["truncated"]``), so ``step`` and ``grad_step`` count steps the same way.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from bcg_envs.envs.base import Jacobians, MjxEnv
from bcg_envs.gradients.config import BundleConfig, check_estimator
from bcg_envs.registry import make_jax

_HIDDEN_INFO = ("rng",)

#: Observations are clipped to +-OBS_BOUND so that they always lie in the space.
OBS_BOUND = 1e6


class GradStepResult(NamedTuple):
    """What ``grad_step`` returns: ``step``'s five values plus the Jacobians."""

    observation: np.ndarray
    reward: Any
    terminated: Any
    truncated: Any
    info: Dict[str, Any]
    jacobians: Jacobians


def render_state(renderer, jax_env, state, info) -> np.ndarray:
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


def check_action(action: Any, shape: tuple, name: str = "action") -> np.ndarray:
    """Validate an action (shape, real dtype, finite) and return it as float32."""
    arr = np.asarray(action)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)) or arr.dtype == bool:
        raise ValueError(f"{name} must be a real-valued array of shape {shape}, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or inf), got {arr}")
    return arr.astype(np.float32)


def _to_numpy_info(state) -> Dict[str, Any]:
    info = {k: np.asarray(v) for k, v in state.info.items() if k not in _HIDDEN_INFO}
    info.update({k: np.asarray(v) for k, v in state.metrics.items() if k not in info})  # is_success stays bool
    return info


def _scalarize(info: Dict[str, Any]) -> Dict[str, Any]:
    return {k: (v.item() if v.ndim == 0 else v) for k, v in info.items()}


def _autoreset(env: MjxEnv, new):
    """Replace every ended (done or truncated) state in a batch by a fresh episode."""
    ended = (new.done > 0) | new.info["truncated"]
    keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(new.info["rng"])
    fresh = jax.vmap(env.reset)(keys)

    def pick(a, b):
        return jnp.where(ended.reshape(ended.shape + (1,) * (a.ndim - 1)), a, b)

    return jax.tree.map(pick, fresh, new)


def task_spaces(jax_env: MjxEnv) -> Tuple[spaces.Box, spaces.Box]:
    """One env's (observation, action) spaces: observations within +-OBS_BOUND, actions in [-1, 1]."""
    return (
        spaces.Box(-OBS_BOUND, OBS_BOUND, (jax_env.observation_size,), np.float32),
        spaces.Box(-1.0, 1.0, (jax_env.action_size,), np.float32),
    )


def set_vector_spaces(vector_env: gymnasium.vector.VectorEnv, jax_env: MjxEnv, num_envs: int) -> None:
    """A vector env's single and batched spaces (Gymnasium's ``VectorEnv`` attributes)."""
    vector_env.single_observation_space, vector_env.single_action_space = task_spaces(jax_env)
    vector_env.observation_space = batch_space(vector_env.single_observation_space, num_envs)
    vector_env.action_space = batch_space(vector_env.single_action_space, num_envs)


class _Jitted:
    """Jitted reset/step/grad_step of one JAX env, shared by the single and vector adapters.

    Batched functions return ``(ended_state, next_state, ...)``: the state the step
    reached and the state after autoreset.
    """

    def __init__(self, env: MjxEnv, batched: bool) -> None:
        self.env = env
        self.batched = batched
        if batched:
            self.reset = jax.jit(jax.vmap(env.reset))

            def step(states, actions):
                new = jax.vmap(env.step)(states, actions)
                return new, _autoreset(env, new)

            self.step = jax.jit(step)
        else:
            self.reset = jax.jit(env.reset)
            self.step = jax.jit(env.step)
        # Jitted like reset/step, so that set_state's state has the same (uncommitted)
        # arrays as theirs and grad_step does not compile a second time for it.
        self.state_from = jax.jit(env.state_from)
        self._grad: Dict[tuple, Any] = {}

    def grad_step(self, estimator: Optional[str], bundle: Optional[BundleConfig]):
        if bundle is not None and not isinstance(bundle, BundleConfig):
            raise ValueError(f"bundle must be a BundleConfig or None, got {type(bundle).__name__}")
        key = (check_estimator(estimator or self.env.estimator), bundle)
        if key not in self._grad:
            env = self.env
            env.stepper(*key)  # build outside of any trace

            def one(state, action):
                return env.grad_step(state, action, key[0], bundle)

            if self.batched:

                def batched(states, actions):
                    new, jac = jax.vmap(one)(states, actions)
                    return new, _autoreset(env, new), jac

                self._grad[key] = jax.jit(batched)
            else:
                self._grad[key] = jax.jit(one)
        return self._grad[key]


class TaskEnv(gymnasium.Env):
    """What the single Gymnasium envs of both backends share: spaces, rendering, the reset
    guard and ``set_state``'s argument checks. Subclasses provide ``get_state`` and
    ``_task_info`` (the episode's task info, ``None`` before the first reset)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def _setup(self, env_name: str, jax_env: MjxEnv, render_mode: Optional[str], width: int, height: int) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.env_name = env_name
        self.jax_env = jax_env
        self.render_mode = render_mode
        self.metadata = dict(self.metadata, render_fps=int(round(1.0 / jax_env.dt)))
        self._size = (height, width)
        self._renderer = None
        self.observation_space, self.action_space = task_spaces(jax_env)

    def _task_info(self) -> Optional[Dict[str, Any]]:
        raise NotImplementedError

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        self._require_reset()
        import mujoco

        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, *self._size)
        return render_state(self._renderer, self.jax_env, self.get_state(), self._task_info())

    def close(self):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def _require_reset(self) -> None:
        if self._task_info() is None:
            raise RuntimeError(f"{self.env_name}: call reset() before step(), grad_step() or state access")

    def _checked_state(self, qpos, qvel, act):
        """``set_state``'s arguments as float64 vectors of the model's sizes."""
        self._require_reset()
        m = self.model
        qpos, qvel = _check_vector(qpos, m.nq, "qpos"), _check_vector(qvel, m.nv, "qvel")
        return qpos, qvel, None if act is None else _check_vector(act, m.na, "act")


class GymEnv(TaskEnv):
    """A bcg_envs task as a Gymnasium environment (NumPy in and out)."""

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
        """``jax_env``: wrap this already-built JAX env of ``env_name`` instead of making
        one from ``env_kwargs``."""
        if backend not in ("mjx", "mujoco"):
            raise ValueError(f"backend must be 'mjx' or 'mujoco', got {backend!r}")
        if backend == "mujoco":
            raise ValueError("GymEnv is the MJX backend; use gym.make(id, backend='mujoco')")
        if jax_env is not None and env_kwargs:
            raise ValueError(f"give either jax_env or env keyword arguments, not both (got {sorted(env_kwargs)})")
        self._state = None
        self._setup(env_name, jax_env if jax_env is not None else make_jax(env_name, **env_kwargs), render_mode, width,
                    height)
        self._fns = _Jitted(self.jax_env, batched=False)

    # ----- Gymnasium API ----------------------------------------------------------------
    @property
    def model(self):
        """The ``mujoco.MjModel`` simulated (contact stiffness applied)."""
        return self.jax_env.mj_model

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        key = jax.random.PRNGKey(int(self.np_random.integers(0, 2**31 - 1)))
        self._state = self._fns.reset(key)
        return self._observation(), _scalarize(_to_numpy_info(self._state))

    def step(self, action):
        self._require_reset()
        action = check_action(action, self.action_space.shape)
        self._state = self._fns.step(self._state, action)
        return self._outputs()

    def grad_step(self, action, estimator: Optional[str] = None, bundle: Optional[BundleConfig] = None) -> GradStepResult:
        """``step`` plus the step's Jacobians, from ``estimator``."""
        self._require_reset()
        fn = self._fns.grad_step(estimator, bundle)
        action = check_action(action, self.action_space.shape)
        self._state, jac = fn(self._state, action)
        obs, reward, terminated, truncated, info = self._outputs()
        jac = Jacobians(*(np.asarray(j) for j in jac))
        return GradStepResult(obs, reward, terminated, truncated, info, jac)

    # ----- state access ----------------------------------------------------
    def get_state(self):
        """(qpos, qvel, act) as NumPy arrays."""
        self._require_reset()
        d = self._state.data
        return np.asarray(d.qpos), np.asarray(d.qvel), np.asarray(d.act)

    def set_state(self, qpos, qvel, act=None) -> None:
        """Set the simulator state; the episode's task info (goal, step count) is kept."""
        qpos, qvel, act = self._checked_state(qpos, qvel, act)
        old = self._state
        task_info = {k: v for k, v in old.info.items() if k != "rng"}
        self._state = self._fns.state_from(qpos, qvel, act, task_info, old.info["rng"])

    # ----- helpers --------------------------------------------------------------------
    def _task_info(self):
        return None if self._state is None else self._state.info

    def _observation(self) -> np.ndarray:
        return np.clip(np.asarray(self._state.obs, dtype=np.float32), -OBS_BOUND, OBS_BOUND)

    def _outputs(self):
        s = self._state
        done = bool(s.done > 0)
        info = _scalarize(_to_numpy_info(s))
        truncated = bool(info["truncated"]) and not done
        return self._observation(), float(s.reward), done, truncated, info


def _check_vector(value, size: int, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


class GymVectorEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` copies stepped in one ``jax.vmap`` call, with same-step autoreset.

    When an episode ends, ``step`` returns the new episode's first observation and puts
    the last one in ``info["final_obs"]`` (mask ``info["_final_obs"]``).
    """

    metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}

    def __init__(self, env_name: str, num_envs: int, *, render_mode: Optional[str] = None, backend: str = "mjx", **env_kwargs: Any):
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if render_mode is not None:
            raise ValueError("GymVectorEnv does not render; use render_mode=None")
        if backend != "mjx":
            raise ValueError("GymVectorEnv is the MJX backend; use gym.make_vec(id, num_envs, backend='mujoco')")
        self.env_name = env_name
        self.jax_env: MjxEnv = make_jax(env_name, **env_kwargs)
        self.num_envs = num_envs
        self.render_mode = None
        set_vector_spaces(self, self.jax_env, num_envs)
        self._fns = _Jitted(self.jax_env, batched=True)
        self._state = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        base = int(self.np_random.integers(0, 2**31 - 1))
        keys = jax.random.split(jax.random.PRNGKey(base), self.num_envs)
        self._state = self._fns.reset(keys)
        return np.clip(np.asarray(self._state.obs, np.float32), -OBS_BOUND, OBS_BOUND), _to_numpy_info(self._state)

    def step(self, actions):
        self._require_reset()
        actions = check_action(actions, self.action_space.shape, "actions")
        ended_state, self._state = self._fns.step(self._state, actions)
        return self._outputs(ended_state)

    def grad_step(self, actions, estimator: Optional[str] = None, bundle: Optional[BundleConfig] = None) -> GradStepResult:
        """Batched ``grad_step``: every Jacobian gets a leading ``num_envs`` axis."""
        self._require_reset()
        fn = self._fns.grad_step(estimator, bundle)
        actions = check_action(actions, self.action_space.shape, "actions")
        ended_state, self._state, jac = fn(self._state, actions)
        out = self._outputs(ended_state)
        return GradStepResult(*out, Jacobians(*(np.asarray(j) for j in jac)))

    def _require_reset(self) -> None:
        if self._state is None:
            raise RuntimeError(f"{self.env_name}: call reset() before step() or grad_step()")

    def _outputs(self, ended_state):
        done = np.asarray(ended_state.done) > 0
        trunc = np.asarray(ended_state.info["truncated"]) & ~done
        info = _to_numpy_info(ended_state)
        ended = done | trunc
        info["final_obs"] = np.clip(np.asarray(ended_state.obs, np.float32), -OBS_BOUND, OBS_BOUND)
        info["_final_obs"] = ended
        return np.clip(np.asarray(self._state.obs, np.float32), -OBS_BOUND, OBS_BOUND), np.asarray(ended_state.reward, np.float32), done, trunc, info
