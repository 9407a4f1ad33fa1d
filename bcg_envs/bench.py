"""``bcg-envs bench``: step and grad_step cost, batched throughput vs raw MJX, the cost
of rollout gradients (reverse mode vs the transposed-Jacobian backward pass) and of one
SHAC iteration against its forward rollout.

Everything is measured in one run and reported as ratios too (these machines are noisy,
so compare ratios, not absolute times, across runs).
"""

from __future__ import annotations

import resource
import time
from typing import Dict, List, Sequence

import numpy as np

from bcg_envs.gradients.registry import ESTIMATORS


def device_summary() -> str:
    """JAX's first device as ``platform (device kind)``, e.g. ``gpu (NVIDIA H200)`` or
    ``cpu (cpu)``, with the device count and the jax version: the report's header."""
    import jax

    devices = jax.devices()
    count = f"{len(devices)} device{'s' if len(devices) > 1 else ''}"
    return f"{devices[0].platform} ({devices[0].device_kind}), {count}, jax {jax.__version__}"


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


def _vmapped_rollout(jax_env, actions):
    """Jitted ``states -> final observations`` of a batched rollout under ``actions``
    (steps, envs, action size), no gradient: the forward cost the ratios divide by."""
    import jax

    @jax.jit
    def rollout(states):
        def body(s, a):
            return jax.vmap(jax_env.step)(s, a), None

        return jax.lax.scan(body, states, actions)[0].obs

    return rollout


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
        compiles[f"compile grad_step {estimator}"] = _seconds(
            lambda: env.unwrapped.grad_step(action, estimator=estimator)
        )
        results[f"grad_step {estimator}"] = _median_seconds(
            lambda: env.unwrapped.grad_step(action, estimator=estimator), repeats
        )

    jax_env = env.unwrapped.jax_env
    physics = jax_env.physics
    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
    states = jax.jit(jax.vmap(jax_env.reset))(keys)
    actions = jnp.zeros((steps, num_envs, jax_env.action_size))

    env_rollout = _vmapped_rollout(jax_env, actions)

    ctrl = jnp.zeros((steps, num_envs, physics.mj_model.nu))

    @jax.jit
    def raw_rollout(d):
        def body(d, c):
            return jax.vmap(physics.control_step)(d, c), None

        return jax.lax.scan(body, d, ctrl)[0].qpos

    data = states.data
    compiles[f"compile {num_envs}-env x {steps}-step rollout"] = _seconds(
        lambda: jax.block_until_ready(env_rollout(states))
    )
    jax.block_until_ready(raw_rollout(data))
    t_env = _median_seconds(lambda: jax.block_until_ready(env_rollout(states)), 3)
    t_raw = _median_seconds(lambda: jax.block_until_ready(raw_rollout(data)), 3)
    results["env steps/s (vmap)"] = num_envs * steps / t_env
    results["raw mjx control steps/s (vmap)"] = num_envs * steps / t_raw
    env.close()
    return {**results, **compiles}


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far (GB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def rollout_gradients(
    env_id: str = "BoxPush-v0",
    num_envs: int = 16,
    horizon: int = 32,
    estimators: Sequence[str] = ESTIMATORS,
    backwards: Sequence[str] = ("vjp", "jacobians"),
    repeats: int = 3,
) -> List[Dict[str, float]]:
    """Cost of ``jax.grad`` of a ``horizon``-step rollout return of ``num_envs`` vmapped
    envs (random actions from resets), per estimator and backward pass, against the same
    rollout without gradients. Rows: ``estimator``, ``backward``, ``compile_s`` (first
    call), ``grad_ms``, ``forward_ms``, ``ratio`` (grad / forward), ``peak_rss_gb`` (the
    process's peak after the row), ``bundled`` (fraction of the rollout's steps the
    estimator bundled). ``bcg (no trigger)`` runs bcg with an unreachable force threshold:
    its cost over exact's is the price of the contact check. ``bcg (any contact)`` runs bcg
    with threshold 0, so every step with a contact force bundles: the cost at triggered
    steps (on G1 and in PlanarHand's grasp every step; BoxPush under random actions
    rarely touches the box, so its ``bundled`` is small)."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    import bcg_envs

    env = bcg_envs.make_jax(env_id)
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), num_envs))
    actions = 0.5 * jax.random.uniform(jax.random.PRNGKey(1), (num_envs, horizon, env.action_size), minval=-1, maxval=1)
    cases = [(e, e, None) for e in estimators]
    if "bcg" in estimators:
        never = dataclasses.replace(env.bundle, force_threshold=1e12)
        cases.append(("bcg (no trigger)", "bcg", never))
        cases.append(("bcg (any contact)", "bcg", dataclasses.replace(env.bundle, force_threshold=0.0)))
    rows = []
    forward = None
    for name, estimator, bundle in cases:
        for backward in backwards:
            stepper = env.stepper(estimator, bundle, backward=backward)

            def ret(acts, state, stepper=stepper):
                """(return, fraction of steps bundled): the fraction rides along as aux."""

                def body(s, a):
                    s = env.step_with(stepper, s, a)
                    return s, (s.reward, s.info["bundled"])

                rewards, bundled = jax.lax.scan(body, state, acts)[1]
                return jnp.sum(rewards), jnp.mean(bundled.astype(jnp.float32))

            grad = jax.jit(jax.vmap(jax.grad(ret, has_aux=True)))
            if forward is None:  # the same physics for every estimator: one forward program
                forward = jax.jit(jax.vmap(lambda acts, state, ret=ret: ret(acts, state)[0]))
            jax.block_until_ready(forward(actions, states))  # (re)compiled after clear_caches
            t0 = time.perf_counter()
            _, bundled = jax.block_until_ready(grad(actions, states))
            compile_s = time.perf_counter() - t0
            # Interleaved, so that both medians see the same load on a shared machine.
            times = [
                (
                    _seconds(lambda: jax.block_until_ready(grad(actions, states))),
                    _seconds(lambda: jax.block_until_ready(forward(actions, states))),
                )
                for _ in range(repeats)
            ]
            grad_s, fwd_s = (float(np.median(t)) for t in zip(*times))
            rows.append(
                {
                    "estimator": name,
                    "backward": backward,
                    "compile_s": compile_s,
                    "grad_ms": 1e3 * grad_s,
                    "forward_ms": 1e3 * fwd_s,
                    "ratio": grad_s / fwd_s,
                    "peak_rss_gb": peak_rss_gb(),
                    "bundled": float(jnp.mean(bundled)),
                }
            )
            jax.clear_caches()  # compiled programs hold memory maps; keep the process small
    return rows


def report_rollout_gradients(rows: List[Dict[str, float]], env_id: str, num_envs: int, horizon: int) -> str:
    """Markdown table of ``rollout_gradients`` rows, with vjp / jacobians ratios."""
    by_key = {(r["estimator"], r["backward"]): r for r in rows}
    lines = [
        f"Rollout gradient, {env_id}, {num_envs} envs x {horizon} steps (jax.grad of the return, vmapped):",
        "",
        "| estimator | backward | steps bundled | compile (s) | grad (ms) | forward (ms) | grad / forward "
        "| vjp / jacobians | peak RSS (GB) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        other = by_key.get((r["estimator"], "jacobians"))
        speed = f"{r['grad_ms'] / other['grad_ms']:.2f}x" if r["backward"] == "vjp" and other else ""
        lines.append(
            f"| {r['estimator']} | {r['backward']} | {100 * r['bundled']:.0f} % | {r['compile_s']:.1f} | {r['grad_ms']:.1f} | {r['forward_ms']:.1f} "
            f"| {r['ratio']:.1f}x | {speed} | {r['peak_rss_gb']:.1f} |"
        )
    exact, quiet = by_key.get(("exact", "vjp")), by_key.get(("bcg (no trigger)", "vjp"))
    busy = by_key.get(("bcg (any contact)", "vjp"))
    if exact and quiet:
        lines += ["", f"bcg / exact with nothing triggering (vjp): {quiet['grad_ms'] / exact['grad_ms']:.2f}x"]
    if exact and busy:
        lines += [
            f"bcg / exact with every contact step bundled (vjp, {100 * busy['bundled']:.0f} % of steps): "
            f"{busy['grad_ms'] / exact['grad_ms']:.2f}x"
        ]
    return "\n".join(lines)


def shac_iterations(
    env_id: str = "BoxPush-v0",
    num_envs: int = 16,
    horizon: int = 32,
    estimators: Sequence[str] = ("exact", "bcg"),
    iterations: int = 4,
) -> List[Dict[str, float]]:
    """Cost of one SHAC iteration (rollout, actor gradient, critic updates) against the
    forward rollout it contains (``num_envs`` x ``horizon`` env steps, vmapped, no
    gradient), per estimator. ``iterations`` iterations run with no evaluation; the first
    holds the compile (``compile_s`` = first minus a later one), the median of the rest is
    ``iteration_ms``. Paper-size networks (SHAC's defaults)."""
    import csv
    import tempfile
    from pathlib import Path

    import jax
    import jax.numpy as jnp

    import bcg_envs
    from bcg_envs.learners import shac

    if iterations < 2:
        raise ValueError(f"iterations must be >= 2 (the first holds the compile), got {iterations}")
    rows = []
    for estimator in estimators:
        env = bcg_envs.make_jax(env_id, estimator=estimator)
        with tempfile.TemporaryDirectory() as log_dir:
            shac.train(
                env,
                num_envs=num_envs,
                horizon=horizon,
                num_timesteps=iterations * num_envs * horizon,
                num_evals=0,
                progress_bar=False,
                log_dir=log_dir,
            )
            with (Path(log_dir) / "progress.csv").open() as f:
                wall = np.array([float(r["walltime"]) for r in csv.DictReader(f)])
        per_iter = np.diff(np.concatenate([[0.0], wall]))
        iteration_s = float(np.median(per_iter[1:]))
        states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), num_envs))
        actions = jnp.zeros((horizon, num_envs, env.action_size))

        rollout = _vmapped_rollout(env, actions)
        jax.block_until_ready(rollout(states))
        forward_s = _median_seconds(lambda: jax.block_until_ready(rollout(states)), 5)
        rows.append(
            {
                "estimator": estimator,
                "compile_s": float(per_iter[0] - iteration_s),
                "iteration_ms": 1e3 * iteration_s,
                "forward_ms": 1e3 * forward_s,
                "ratio": iteration_s / forward_s,
                "peak_rss_gb": peak_rss_gb(),
            }
        )
        jax.clear_caches()
    return rows


def report_shac_iterations(rows: List[Dict[str, float]], env_id: str, num_envs: int, horizon: int) -> str:
    """Markdown table of ``shac_iterations`` rows."""
    lines = [
        f"SHAC iteration, {env_id}, {num_envs} envs x {horizon} steps (paper-size networks):",
        "",
        "| estimator | compile (s) | iteration (ms) | forward rollout (ms) | iteration / forward | peak RSS (GB) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['estimator']} | {r['compile_s']:.1f} | {r['iteration_ms']:.1f} | {r['forward_ms']:.1f} "
            f"| {r['ratio']:.1f}x | {r['peak_rss_gb']:.1f} |"
        )
    return "\n".join(lines)


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
    print(report_rollout_gradients(rollout_gradients(), "BoxPush-v0", 16, 32))


_THREAD_PROBE = """
import json, sys, time
import numpy as np, gymnasium as gym, bcg_envs

env_id, num_envs, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def rate(fn, n):
    fn()  # compile (or load) first
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t0)

vec = gym.make_vec(f"bcg_envs/{env_id}", num_envs=num_envs)
vec.reset(seed=0)
a = np.zeros(vec.action_space.shape, np.float32)
one = gym.make(f"bcg_envs/{env_id}")
one.reset(seed=0)
a1 = np.zeros(one.action_space.shape, np.float32)
print(json.dumps({
    "step, one env": rate(lambda: one.step(a1), 10 * repeats),
    "grad_step exact, one env": rate(lambda: one.unwrapped.grad_step(a1, estimator="exact"), repeats),
    f"step, {num_envs} envs": num_envs * rate(lambda: vec.step(a), 5 * repeats),
    f"grad_step exact, {num_envs} envs": num_envs * rate(lambda: vec.grad_step(a, estimator="exact"), repeats),
    f"grad_step bcg, {num_envs} envs": num_envs * rate(lambda: vec.grad_step(a, estimator="bcg"), repeats),
}))
"""


def cpu_threads(
    env_id: str = "BoxPush-v0", num_envs: int = 64, repeats: int = 20, rounds: int = 2, timeout: float = 1800.0
) -> Dict[str, Dict[str, List[float]]]:
    """Env-steps/s of the Gymnasium envs (MJX backend) under ``BCG_ENVS_CPU_THREADS=1``
    (one intra-op thread, the default) and ``auto`` (XLA's pool), each in fresh processes,
    the two settings alternating for ``rounds`` rounds. Returns ``{setting: {measure:
    [rate per round]}}``; a round of ``auto`` that did not finish within ``timeout`` s (the
    deadlock this default avoids) is recorded as an empty dict under ``"auto hung"``."""
    import json
    import os
    import subprocess
    import sys

    out: Dict[str, Dict[str, List[float]]] = {"1": {}, "auto": {}}
    for _ in range(rounds):
        for setting in ("1", "auto"):
            env = dict(os.environ, BCG_ENVS_CPU_THREADS=setting)
            try:
                done = subprocess.run(
                    [sys.executable, "-c", _THREAD_PROBE, env_id, str(num_envs), str(repeats)],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=timeout,
                    check=True,
                )
            except subprocess.TimeoutExpired:
                out.setdefault(f"{setting} hung", {})
                continue
            for key, value in json.loads(done.stdout.strip().splitlines()[-1]).items():
                out[setting].setdefault(key, []).append(value)
    return out


def report_cpu_threads(results: Dict[str, Dict[str, List[float]]], env_id: str) -> str:
    """Markdown table: median env-steps/s per setting and their ratio (one intra-op thread
    over XLA's pool; above 1 means the default is faster)."""
    lines = [
        f"{env_id}, MJX backend: env-steps/s (median of {len(next(iter(results['1'].values()), []))} "
        "fresh processes per setting, alternating)",
        "",
        "| measure | one thread (default) | XLA pool (`auto`) | default / auto |",
        "|---|---|---|---|",
    ]
    for key, ones in results["1"].items():
        autos = results["auto"].get(key, [])
        one, auto = float(np.median(ones)), float(np.median(autos)) if autos else float("nan")
        lines.append(f"| {key} | {one:,.0f} | {auto:,.0f} | {one / auto:.2f} |")
    hung = [k for k in results if k.endswith("hung")]
    if hung:
        lines.append(f"\nRounds that did not finish (hang): {', '.join(hung)}.")
    return "\n".join(lines)


def backend_latency(env_id: str = "BoxPush-v0", steps: int = 200, rounds: int = 7) -> Dict[str, Dict[str, List[float]]]:
    """Single-env Gymnasium ``step`` latency of ``backend="mujoco"``, Gymnasium's
    ``Pusher-v5`` (MuJoCo C with NumPy task code: the bar for a C env) and
    ``backend="mjx"``, in interleaved blocks of ``steps`` random-action steps (``rounds``
    rounds, the order rotating each round), so that all three see the same machine load.
    Returns per env ``{"wall": [...], "cpu": [...]}``: seconds per step of each block
    (wall clock and this process's CPU time)."""
    import gymnasium

    import bcg_envs  # noqa: F401  (registers the ids)

    # All three through gymnasium.make, so each carries Gymnasium's default wrappers.
    envs = {
        "mujoco": gymnasium.make(f"bcg_envs/{env_id}", backend="mujoco"),
        "Pusher-v5": gymnasium.make("Pusher-v5"),
        "mjx": gymnasium.make(f"bcg_envs/{env_id}", backend="mjx"),
    }
    rng = np.random.default_rng(0)
    out: Dict[str, Dict[str, List[float]]] = {name: {"wall": [], "cpu": []} for name in envs}

    def block(env) -> tuple:
        actions = rng.uniform(-1.0, 1.0, (steps, *env.action_space.shape)).astype(env.action_space.dtype)
        wall, cpu = time.perf_counter(), time.process_time()
        for a in actions:
            _, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                env.reset()
        return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps

    try:
        for env in envs.values():
            env.reset(seed=0)
            block(env)  # warm-up: compiles (mjx), caches
        names = list(envs)
        for r in range(rounds):
            for name in names[r % 3 :] + names[: r % 3]:
                wall, cpu = block(envs[name])
                out[name]["wall"].append(wall)
                out[name]["cpu"].append(cpu)
    finally:
        for env in envs.values():
            env.close()
    return out


def report_backend_latency(results: Dict[str, Dict[str, List[float]]], env_id: str) -> str:
    """Median microseconds per step and the ratios to Pusher-v5 (same run)."""
    med = {name: {k: float(np.median(v)) for k, v in r.items()} for name, r in results.items()}
    rounds = len(next(iter(results.values()))["wall"])
    lines = [
        f"single-env step latency, {env_id} (median of {rounds} interleaved blocks):",
        "| env | wall µs/step | CPU µs/step | wall / Pusher-v5 | CPU / Pusher-v5 |",
        "|---|---|---|---|---|",
    ]
    base = med["Pusher-v5"]
    for name, m in med.items():
        label = name if name == "Pusher-v5" else f'{env_id}, backend="{name}"'
        lines.append(
            f"| {label} | {1e6 * m['wall']:.0f} | {1e6 * m['cpu']:.0f} | {m['wall'] / base['wall']:.2f}x "
            f"| {m['cpu'] / base['cpu']:.2f}x |"
        )
    return "\n".join(lines)
