"""``bcg-envs bench``: step and grad_step cost, and batched throughput vs raw MJX.

Everything is measured in one run and reported as ratios too (these machines are noisy,
so compare ratios, not absolute times, across runs).
"""

from __future__ import annotations

import time
from typing import Dict

import numpy as np

from bcg_envs.gradients.config import ESTIMATORS


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(
    env_id: str = "BoxPush-v0", num_envs: int = 64, steps: int = 20, repeats: int = 20, estimators=ESTIMATORS
) -> Dict[str, float]:
    """Seconds per call (keys without a suffix), first-call seconds (``compile ...``: jit
    compile plus one call, with the persistent compile cache as configured) and batched
    throughput (``... (vmap)``, steps/s)."""
    import gymnasium as gym
    import jax
    import jax.numpy as jnp

    import bcg_envs

    results: Dict[str, float] = {}
    env = gym.make(f"bcg_envs/{bcg_envs.registry.short_name(env_id)}")
    env.reset(seed=0)
    action = np.zeros(env.action_space.shape, np.float32)
    compiles = {"compile gym step": _seconds(lambda: env.step(action))}
    results["gym step"] = _median_seconds(lambda: env.step(action), repeats)
    for estimator in estimators:
        compiles[f"compile grad_step {estimator}"] = _seconds(lambda: env.unwrapped.grad_step(action, estimator=estimator))
        results[f"grad_step {estimator}"] = _median_seconds(
            lambda: env.unwrapped.grad_step(action, estimator=estimator), repeats
        )

    jax_env = env.unwrapped.jax_env
    physics = jax_env.physics
    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
    states = jax.jit(jax.vmap(jax_env.reset))(keys)
    actions = jnp.zeros((steps, num_envs, jax_env.action_size))

    @jax.jit
    def env_rollout(s):
        def body(s, a):
            return jax.vmap(jax_env.step)(s, a), None

        return jax.lax.scan(body, s, actions)[0].obs

    ctrl = jnp.zeros((steps, num_envs, physics.mj_model.nu))

    @jax.jit
    def raw_rollout(d):
        def body(d, c):
            return jax.vmap(physics.control_step)(d, c), None

        return jax.lax.scan(body, d, ctrl)[0].qpos

    data = states.data
    compiles[f"compile {num_envs}-env x {steps}-step rollout"] = _seconds(lambda: jax.block_until_ready(env_rollout(states)))
    jax.block_until_ready(raw_rollout(data))
    t_env = _median_seconds(lambda: jax.block_until_ready(env_rollout(states)), 3)
    t_raw = _median_seconds(lambda: jax.block_until_ready(raw_rollout(data)), 3)
    results["env steps/s (vmap)"] = num_envs * steps / t_env
    results["raw mjx control steps/s (vmap)"] = num_envs * steps / t_raw
    env.close()
    return {**results, **compiles}


def report(results: Dict[str, float]) -> str:
    base = results["gym step"]
    lines = ["| measurement | value | ratio |", "|---|---|---|"]
    for key, value in results.items():
        if key.endswith("(vmap)"):
            continue
        if key.startswith("compile"):
            lines.append(f"| {key} (first call) | {value:.1f} s | |")
            continue
        lines.append(f"| {key} | {1e3 * value:.2f} ms | {value / base:.1f}x gym step |")
    env_tp = results["env steps/s (vmap)"]
    raw_tp = results["raw mjx control steps/s (vmap)"]
    lines.append(f"| env steps/s (vmap) | {env_tp:,.0f} | {env_tp / raw_tp:.2f}x raw vmap(mjx.step) |")
    lines.append(f"| raw vmap(mjx.step) control steps/s | {raw_tp:,.0f} | 1.00x |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
