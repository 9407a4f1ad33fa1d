"""``backend="mjx"``: the Gymnasium envs' simulations stepped as jitted JAX functions.

``MjxSimulation`` (one env) and ``MjxBatchSimulation`` (``num_envs`` copies in one
``jax.vmap`` call, same-step autoreset) implement ``bcg_envs.gym.Simulation`` and
``BatchSimulation`` over a JAX env: reset, step and ``grad_step`` are the env's own
functions, jitted once per simulation (``grad_step`` once per (estimator, bundle)). The
step is the env's ``plain_step``: a Gymnasium step is never differentiated, so it
compiles without the estimator's derivative rules and ``bcg``'s branch rollouts.
Arguments arrive checked by the Gymnasium classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

import jax
import numpy as np

from bcg_envs.cpu_runtime import wait_ready
from bcg_envs.envs.autoreset import autoreset as autoreset_batch
from bcg_envs.envs.base import BRANCH_INFO, OBS_BOUND, Jacobians, MjxEnv, State, reset_key
from bcg_envs.gradients.config import BundleConfig
from bcg_envs.gradients.registry import Estimator, resolve

if TYPE_CHECKING:
    import mujoco
    from mujoco import mjx

#: State info entries that stay inside the simulation: the key, and a running bcg branch
#: rollout (B copies of the state, which the MuJoCo C backend never has).
_HIDDEN_INFO = ("rng", *BRANCH_INFO)


def numpy_info(state: State) -> Dict[str, Any]:
    """A state's info and metrics as NumPy arrays (``rng`` left out; ``is_success`` stays bool)."""
    info = {k: np.asarray(v) for k, v in state.info.items() if k not in _HIDDEN_INFO}
    info.update({k: np.asarray(v) for k, v in state.metrics.items() if k not in info})
    return info


def scalar_info(info: Dict[str, Any]) -> Dict[str, Any]:
    """0-d arrays of one env's info as Python scalars."""
    return {k: (v.item() if v.ndim == 0 else v) for k, v in info.items()}


def clipped_observation(obs: Any) -> np.ndarray:
    """Observation(s) as float32 within +-``OBS_BOUND``."""
    return np.clip(np.asarray(obs, dtype=np.float32), -OBS_BOUND, OBS_BOUND)


def autoreset(env: MjxEnv, new: State) -> State:
    """``new`` (a batch of ``env``'s states) with every ended episode replaced by a fresh
    one: ``bcg_envs.envs.autoreset.autoreset`` with ``env``'s batched reset."""
    return autoreset_batch(new, jax.vmap(env.reset))


def _jacobians_numpy(jac) -> Jacobians:
    return Jacobians(*(np.asarray(j) for j in jac))


class _JittedFunctions:
    """Jitted reset/step/grad_step of one JAX env, single or batched. Batched step
    functions return ``(ended_state, next_state, ...)``: the state the step reached and
    the state after autoreset."""

    def __init__(self, env: MjxEnv, batched: bool) -> None:
        self.env = env
        self.batched = batched
        if batched:
            self.reset = jax.jit(jax.vmap(env.reset))

            def step(states, actions):
                new = jax.vmap(env.plain_step)(states, actions)
                return new, autoreset(env, new)

            self.step = jax.jit(step)
        else:
            self.reset = jax.jit(env.reset)
            self.step = jax.jit(env.plain_step)
        # Jitted like reset/step, so that set_state's state has the same (uncommitted)
        # arrays as theirs and grad_step does not compile a second time for it.
        self.state_from = jax.jit(env.state_from)
        self._grad: Dict[tuple, Any] = {}

    def grad_step(self, estimator: Estimator, bundle: Optional[BundleConfig]) -> Callable[..., Any]:
        key = (estimator, bundle)
        if key not in self._grad:
            env = self.env
            env.stepper(*key)  # build outside of any trace

            def one(state, action):
                return env.grad_step(state, action, estimator, bundle)

            if self.batched:

                def batched(states, actions):
                    new, jac = jax.vmap(one)(states, actions)
                    return new, autoreset(env, new), jac

                self._grad[key] = jax.jit(batched)
            else:
                self._grad[key] = jax.jit(one)
        return self._grad[key]


class MjxSimulation:
    """One env of a JAX task stepped by its jitted MJX functions (float32)."""

    def __init__(self, jax_env: MjxEnv) -> None:
        self.jax_env = jax_env
        self.default_estimator = resolve(jax_env.estimator)
        self._fns = _JittedFunctions(jax_env, batched=False)
        self.state = None  # the env's ``State``; None before the first reset

    @property
    def model(self) -> mujoco.MjModel:
        """The ``mujoco.MjModel`` simulated (contact stiffness applied)."""
        return self.jax_env.mj_model

    @property
    def data(self) -> mjx.Data:
        """The current ``mjx.Data``."""
        return self.state.data

    def reset(self, rng: np.random.Generator) -> Tuple[np.ndarray, Dict[str, Any]]:
        key = reset_key(rng)
        self.state = wait_ready(self._fns.reset(key))
        return clipped_observation(self.state.obs), scalar_info(numpy_info(self.state))

    def step(self, action: np.ndarray) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        self.state = wait_ready(self._fns.step(self.state, action))
        return self._outputs()

    def grad_step(
        self, action: np.ndarray, estimator: Estimator, bundle: Optional[BundleConfig]
    ) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any], Jacobians]:
        self.state, jac = wait_ready(self._fns.grad_step(estimator, bundle)(self.state, action))
        return (*self._outputs(), _jacobians_numpy(jac))

    def get_state(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        d = self.state.data
        return np.array(d.qpos), np.array(d.qvel), np.array(d.act)

    def set_state(
        self, qpos: np.ndarray, qvel: np.ndarray, act: Optional[np.ndarray], step: Optional[int] = None
    ) -> None:
        """A fresh state at (qpos, qvel, act) with the episode's task info; ``step``
        (None: kept) sets the episode step counter and ``truncated`` with it."""
        old = self.state
        task_info = {k: v for k, v in old.info.items() if k != "rng"}
        if step is not None:
            # int32/bool scalars as the state holds them: state_from does not compile again.
            task_info["step"] = np.int32(step)
            task_info["truncated"] = np.bool_(step >= self.jax_env.episode_length)
        self.state = self._fns.state_from(qpos, qvel, act, task_info, old.info["rng"])

    def task_info(self) -> Optional[Dict[str, Any]]:
        return None if self.state is None else self.state.info

    def close(self) -> None:
        pass

    def _outputs(self):
        s = self.state
        done = bool(s.done > 0)
        info = scalar_info(numpy_info(s))
        truncated = bool(info["truncated"]) and not done
        return clipped_observation(s.obs), float(s.reward), done, truncated, info


class MjxBatchSimulation:
    """``num_envs`` copies stepped in one ``jax.vmap`` call, with same-step autoreset."""

    def __init__(self, jax_env: MjxEnv, num_envs: int) -> None:
        self.jax_env = jax_env
        self.num_envs = num_envs
        self.default_estimator = resolve(jax_env.estimator)
        self._fns = _JittedFunctions(jax_env, batched=True)
        self.state = None

    @property
    def model(self) -> mujoco.MjModel:
        return self.jax_env.mj_model

    def reset(self, rng: np.random.Generator) -> Tuple[np.ndarray, Dict[str, Any]]:
        base = int(rng.integers(0, 2**31 - 1))
        keys = jax.random.split(jax.random.PRNGKey(base), self.num_envs)
        self.state = wait_ready(self._fns.reset(keys))
        return clipped_observation(self.state.obs), numpy_info(self.state)

    def step(self, actions: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        ended_state, self.state = wait_ready(self._fns.step(self.state, actions))
        return self._outputs(ended_state)

    def grad_step(
        self, actions: np.ndarray, estimator: Estimator, bundle: Optional[BundleConfig]
    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any], Jacobians]:
        ended_state, self.state, jac = wait_ready(self._fns.grad_step(estimator, bundle)(self.state, actions))
        return (*self._outputs(ended_state), _jacobians_numpy(jac))

    def close(self) -> None:
        pass

    def _outputs(self, ended_state):
        done = np.asarray(ended_state.done) > 0
        trunc = np.asarray(ended_state.info["truncated"]) & ~done
        info = numpy_info(ended_state)
        info["final_obs"] = clipped_observation(ended_state.obs)
        info["_final_obs"] = done | trunc
        return clipped_observation(self.state.obs), np.asarray(ended_state.reward, np.float32), done, trunc, info
