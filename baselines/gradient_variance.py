"""Gradient quality per estimator across contact stiffness.

    python -m baselines.gradient_variance --env BoxPush-v0 --stiffness soft default stiff \
        --estimators exact bundle zeroth bcg alpha --seeds 16 --out baselines/results/BoxPush-v0

For each stiffness and estimator: the gradient of a ``horizon``-step return with respect
to the start state, from ``seeds`` start states jittered by 1 mm around a state that
starts with a stiff impact (the bundle's own samples also change with the seed). Reported:
the total variance across seeds, the cosine similarity of each seed's gradient to a
smoothed reference (the mean of ``reference_samples`` exact gradients at start states
jittered by the bundle's position sigma), the time per rollout gradient, and the control
steps simulated per environment step (forward evaluations plus forward-mode tangents).
Writes ``gradient_variance.csv`` and ``gradient_variance.png``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from bcg_envs.utils import single_cpu_client

#: Start states that begin with a stiff impact, per env: (qpos, qvel, action).
START = {
    # The pusher 7.8 cm behind the box centre, moving at it at 0.6 m/s, pushing.
    "BoxPush-v0": ([-0.078, 0.0, 0.0, 0.0, 0.0], [0.6, 0.0, 0.0, 0.0, 0.0], [1.0, 0.0]),
    # Both fingers swinging shut from wide open (the state one step before a ~23 N
    # fingertip impact on the disc in a scripted open-then-close episode).
    "PlanarHand-v0": (
        [-0.345, -0.505, -0.345, -0.505, 0.0, 0.0, 0.0],
        [7.0, 12.0, 7.0, 12.0, 0.0, 0.0, 0.0],
        [1.0, 1.0, 1.0, 1.0],
    ),
}


def simulations_per_step(estimator: str, nx: int, nu: int, num_samples: int, bundled_fraction: float) -> float:
    """Control-step evaluations (forward passes + forward-mode tangent passes) per env step."""
    jac = nx + nu
    if estimator == "exact":
        return 1 + jac
    if estimator == "bundle":
        return 1 + num_samples * jac
    if estimator == "zeroth":
        return 2 + num_samples
    if estimator == "alpha":
        return 2 + num_samples * (1 + jac)
    return 1 + jac * (bundled_fraction * num_samples + (1 - bundled_fraction))  # bcg


@functools.lru_cache(maxsize=None)
def _rollout_gradients(env_id: str, stiffness, estimator: str, horizon: int):
    """``(env, grads_at)``: ``grads_at(x0, seeds) -> (gradients, bundled fractions)``, per
    start state in ``x0``, of the ``horizon``-step return; one compiled program per batch
    size, shared by the reference and the ``exact`` row."""
    import jax
    import jax.numpy as jnp

    import bcg_envs

    qpos, qvel, action = (np.asarray(v, np.float32) for v in START[env_id])
    env = bcg_envs.make_jax(env_id, estimator=estimator, contact_stiffness=stiffness)
    base = env.reset(jax.random.PRNGKey(0))
    task_info = {k: v for k, v in base.info.items() if k != "rng"}  # goal etc. (a fresh reset's)
    actions = jnp.tile(jnp.asarray(action), (horizon, 1))
    nq = len(qpos)

    def ret(x0, seed):
        s = env.state_from(x0[:nq], x0[nq:], None, task_info, jax.random.PRNGKey(seed))

        def body(s, a):
            s = env.step(s, a)
            return s, (s.reward, s.info["bundled"])

        _, (r, bundled) = jax.lax.scan(body, s, actions)
        return jnp.sum(r), jnp.mean(bundled)

    grad_fn = jax.jit(jax.vmap(jax.grad(ret, has_aux=True)))

    def grads_at(x0, seeds):
        g, bundled = grad_fn(x0, seeds)
        return np.asarray(g), np.asarray(bundled)

    return env, grads_at


def _start_states(env_id: str, scale: float, n: int, key) -> np.ndarray:
    """``n`` start states (qpos, qvel) around ``START``, positions but the last jittered by
    ``scale`` (m or rad)."""
    import jax
    import jax.numpy as jnp

    qpos, qvel, _ = (jnp.asarray(v, jnp.float32) for v in START[env_id])
    mask = jnp.concatenate([jnp.ones(len(qpos)).at[-1].set(0.0), jnp.zeros(len(qvel))])
    return np.asarray(jnp.concatenate([qpos, qvel]) + scale * jax.random.normal(key, (n, len(mask))) * mask)


def measure(env_id: str, stiffness, estimator: str, seeds: int, horizon: int, position_jitter: float = 1e-3) -> Dict[str, float]:
    import jax

    env, grads_at = _rollout_gradients(env_id, stiffness, estimator, horizon)
    x0 = _start_states(env_id, position_jitter, seeds, jax.random.PRNGKey(1))
    grads_at(x0, np.arange(seeds))  # compile
    t0 = time.perf_counter()
    g, bundled = grads_at(x0, np.arange(seeds))
    seconds = (time.perf_counter() - t0) / seeds
    bundled = float(np.mean(bundled))
    return {"variance": variance_across_seeds(g), "grads": g, "bundled": bundled, "seconds": seconds,
            "sims_per_step": simulations_per_step(estimator, env.state_size, env.action_size, env.stepper(estimator).num_samples, bundled)}


def reference_gradient(env_id: str, stiffness, horizon: int, samples: int, sigma: float, batch: int) -> np.ndarray:
    """Mean of exact rollout gradients over ``samples`` start states jittered by ``sigma``
    (smoothed), ``batch`` at a time: the ``exact`` row's compiled program."""
    import jax

    _, grads_at = _rollout_gradients(env_id, stiffness, "exact", horizon)
    x0 = _start_states(env_id, sigma, samples, jax.random.PRNGKey(1))
    seeds = np.arange(samples)
    pad = -samples % batch  # the last batch is filled up with repeats, then dropped
    x0, seeds = np.concatenate([x0, x0[:pad]]), np.concatenate([seeds, seeds[:pad]])
    grads = np.concatenate([grads_at(x0[i : i + batch], seeds[i : i + batch])[0] for i in range(0, len(seeds), batch)])
    return grads[:samples].mean(axis=0)


def variance_across_seeds(grads: np.ndarray) -> float:
    """Total variance (sum over coordinates) of per-seed gradients, in float64."""
    return float(np.sum(np.var(np.asarray(grads, np.float64), axis=0)))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def sweep(env_id: str, stiffness: List, estimators: List[str], seeds: int, horizon: int, reference_samples: int) -> List[dict]:
    import bcg_envs

    sigma = bcg_envs.BundleConfig().state_sigma[0]
    rows = []
    for k in stiffness:
        ref = reference_gradient(env_id, k, horizon, reference_samples, sigma, batch=seeds)
        for est in estimators:
            m = measure(env_id, k, est, seeds, horizon)
            cos = float(np.mean([cosine(g, ref) for g in m["grads"]]))
            row = dict(env=env_id, stiffness=k, estimator=est, variance=m["variance"], cosine_to_smoothed=cos,
                       ms_per_rollout_gradient=1e3 * m["seconds"], sims_per_step=m["sims_per_step"], bundled_fraction=m["bundled"])
            print(" ".join(f"{key}={val:.4g}" if isinstance(val, float) else f"{key}={val}" for key, val in row.items()))
            rows.append(row)
        held = _memory_maps()
        _release_programs()
        print(f"stiffness={k}: {held} memory maps held by its programs, {_memory_maps()} after release")
    return rows


def _memory_maps() -> Optional[int]:
    """How many memory maps this process holds (Linux; None elsewhere)."""
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def _release_programs() -> None:
    """Drop one stiffness level's envs and compiled programs before the next. XLA's CPU
    code lives in memory maps; a PlanarHand sweep that held all three levels' programs
    reached Linux's default ``vm.max_map_count`` and LLVM failed with 'Cannot allocate
    memory'."""
    import gc

    import jax

    _rollout_gradients.cache_clear()
    jax.clear_caches()
    gc.collect()


def write(rows: List[dict], out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "gradient_variance.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    levels = list(dict.fromkeys(str(r["stiffness"]) for r in rows))
    for est in dict.fromkeys(r["estimator"] for r in rows):
        ys = [next(r["variance"] for r in rows if r["estimator"] == est and str(r["stiffness"]) == lv) for lv in levels]
        ax.semilogy(levels, ys, marker="o", label=est)
    ax.set(xlabel="contact stiffness", ylabel="variance of rollout gradient", title=rows[0]["env"])
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "gradient_variance.png", dpi=120)
    plt.close(fig)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="BoxPush-v0", choices=sorted(START))
    parser.add_argument("--stiffness", nargs="+", default=["soft", "default", "stiff"])
    parser.add_argument("--estimators", nargs="+", default=["exact", "bundle", "zeroth", "bcg", "alpha"])
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--horizon", type=int, default=16)
    parser.add_argument("--reference-samples", type=int, default=64)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    single_cpu_client()  # the 2-core batched-kernel deadlock (see bcg_envs.utils.single_cpu_client)
    rows = sweep(args.env, args.stiffness, args.estimators, args.seeds, args.horizon, args.reference_samples)
    write(rows, Path(args.out or f"baselines/results/{args.env}"))


if __name__ == "__main__":
    main()
