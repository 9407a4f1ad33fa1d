"""Rollout gradients of the gradient-variance sweep: one compiled program per (contact model, estimator)."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, Sequence, Tuple

import numpy as np

from baselines.gradient_variance_contact import ContactModel
from baselines.gradient_variance_starts import Starts

ESTIMATORS = ("exact", "bundle", "zeroth", "bcg", "alpha")


@dataclasses.dataclass
class Block:
    """One (contact model, level, estimator) measurement over all starts and horizons."""

    grads: np.ndarray  # (N, K, T, nu): d(return of the first H_k steps) / d actions
    bundled: np.ndarray  # (N, T) bool: the estimator bundled at that step
    seconds_per_start: float  # wall time of one start's all-horizon gradient, after compile
    compile_seconds: float
    num_samples: int
    nx: int
    nu: int
    bundle_horizon: int  # BundleConfig.horizon: control steps of a bcg branch rollout


def gradient_program(env, horizons: Sequence[int], batch_cotangents: bool = True) -> Callable:
    """``jit(vmap(f))``, ``f(qpos, qvel, task_info, actions (T, nu), seed, level) -> (grads
    (K, T, nu), partial returns (K,), bundled (T,))``: one rollout of ``T = max(horizons)``
    steps of ``env`` at contact stiffness ``level`` (one scalar for the whole batch; see
    ``with_contact_stiffness``) and the gradients of its K partial returns. The K
    cotangents are pulled back batched (``vmap``) or one after another (``lax.map``; for
    ``bcg``, whose batching rule would bundle every cotangent copy)."""
    import jax
    import jax.numpy as jnp

    horizons = np.asarray(horizons)
    mask = jnp.asarray(np.arange(horizons.max())[None, :] < horizons[:, None], jnp.float32)  # (K, T)
    eye = jnp.eye(len(horizons), dtype=jnp.float32)

    def one(qpos, qvel, task_info, actions, seed, level):
        stiff = env.with_contact_stiffness(level)
        state = stiff.state_from(qpos, qvel, None, task_info, jax.random.PRNGKey(seed))

        def partial_returns(acts):
            def body(s, a):
                s = stiff.step(s, a)
                return s, (s.reward, s.info["bundled"])

            _, (rewards, bundled) = jax.lax.scan(body, state, acts)
            return mask @ rewards, bundled

        returns, pull, bundled = jax.vjp(partial_returns, actions, has_aux=True)
        grads = jax.vmap(pull)(eye)[0] if batch_cotangents else jax.lax.map(pull, eye)[0]
        return grads, returns, bundled

    return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, 0, None)))


class ModelRunner:
    """Gradients under one contact model: one compiled program per estimator, with the
    stiffness level as its argument."""

    def __init__(self, env_id: str, model: ContactModel, starts: Starts, horizons: Sequence[int]) -> None:
        self.env_id, self.model = env_id, model
        self.starts, self.horizons = starts, tuple(horizons)
        self._compiled: Dict[str, tuple] = {}

    def _program(self, estimator: str):
        """(env, compiled program, compile seconds) of ``estimator`` (compiled once)."""
        if estimator not in self._compiled:
            import bcg_envs

            level = self.model.levels[0]
            env = bcg_envs.make_jax(self.env_id, estimator=estimator, **self.model.env_kwargs(level))
            program = gradient_program(env, self.horizons, batch_cotangents=estimator != "bcg")
            t0 = time.perf_counter()
            lowered = program.lower(*self._args(self.starts.qpos, self.starts.qvel, level))
            t1 = time.perf_counter()
            compiled = lowered.compile()
            t2 = time.perf_counter()
            print(
                f"{self.model.label} {estimator}: traced in {t1 - t0:.1f} s, compiled in {t2 - t1:.1f} s "
                f"(one program for every level)",
                flush=True,
            )
            self._compiled[estimator] = (env, compiled, t2 - t0)
        return self._compiled[estimator]

    def _args(self, qpos: np.ndarray, qvel: np.ndarray, level: float, seed0: int = 0):
        s = self.starts
        seeds = np.arange(seed0, seed0 + len(s), dtype=np.int32)
        info = {k: np.asarray(v) for k, v in s.task_info.items()}
        return (
            np.asarray(qpos, np.float32),
            np.asarray(qvel, np.float32),
            info,
            np.asarray(s.actions, np.float32),
            seeds,
            np.float32(level),
        )

    def _checked(self, estimator: str, level: float):
        """``_program(estimator)`` after checking ``level`` as the env's constructor would."""
        env, compiled, compile_s = self._program(estimator)
        env.with_contact_stiffness(level)
        return env, compiled, compile_s

    def block(self, estimator: str, level: float) -> Block:
        """All starts' gradients with ``estimator`` at ``level``, timed after compile."""
        env, compiled, compile_s = self._checked(estimator, level)
        t0 = time.perf_counter()
        grads, _, bundled = compiled(*self._args(self.starts.qpos, self.starts.qvel, level))
        grads = np.asarray(grads)
        seconds = (time.perf_counter() - t0) / len(self.starts)
        return Block(
            grads,
            np.asarray(bundled),
            seconds,
            compile_s,
            env.stepper(estimator).num_samples,
            env.state_size,
            env.action_size,
            env.stepper(estimator).config.horizon,
        )

    def reference(self, level: float, samples: int, sigma: Tuple[float, float], seed: int = 1) -> np.ndarray:
        """Per start, the mean of exact gradients at ``level`` at ``samples`` copies of it
        jittered by ``sigma`` (positions m or rad, velocities m/s or rad/s; quaternions
        untouched), (N, K, T, nu); NaN where every copy was non-finite."""
        env, compiled, _ = self._checked("exact", level)
        qmask = _position_mask(env.mj_model)
        rng = np.random.default_rng(seed)
        total, count = 0.0, 0
        for r in range(samples):
            qpos = self.starts.qpos + sigma[0] * rng.standard_normal(self.starts.qpos.shape) * qmask
            qvel = self.starts.qvel + sigma[1] * rng.standard_normal(self.starts.qvel.shape)
            args = self._args(qpos, qvel, level, seed0=(r + 1) * len(self.starts))
            g = np.asarray(compiled(*args)[0], np.float64)
            ok = np.all(np.isfinite(g), axis=(1, 2, 3))
            total = total + np.where(ok[:, None, None, None], g, 0.0)
            count = count + ok
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / np.where(count > 0, count, np.nan)[:, None, None, None]


def _position_mask(mj_model) -> np.ndarray:
    """1 for each qpos coordinate that may be jittered additively, 0 for quaternions."""
    import mujoco

    mask = np.ones(mj_model.nq)
    for j in range(mj_model.njnt):
        adr = mj_model.jnt_qposadr[j]
        if mj_model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            mask[adr + 3 : adr + 7] = 0.0
        elif mj_model.jnt_type[j] == mujoco.mjtJoint.mjJNT_BALL:
            mask[adr : adr + 4] = 0.0
    return mask
