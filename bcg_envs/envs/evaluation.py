"""Episodes of a fixed policy on the Gymnasium envs: success rate, return and length.

Backs the scripted controllers' measuring commands (``python -m
bcg_envs.envs.box_push.scripted``, ``python -m bcg_envs.envs.planar_hand.scripted``).
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable, Dict, Optional

import numpy as np

from bcg_envs.stats import format_success, success_summary

Policy = Callable[[np.ndarray], np.ndarray]


def episode(env: Any, policy: Policy, seed: int, max_steps: Optional[int] = None, frames: Optional[list] = None):
    """One episode of ``policy`` on a Gymnasium ``env`` from ``reset(seed=seed)``, at most
    ``max_steps`` steps (``None``: until it terminates or truncates); appends rendered
    frames to ``frames`` if given. Returns (return, length, success at the last step)."""
    obs, info = env.reset(seed=seed)
    total, steps, success = 0.0, 0, False
    if frames is not None:
        frames.append(env.render())
    while max_steps is None or steps < max_steps:
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        total += float(reward)
        steps += 1
        success = bool(info["is_success"])
        if frames is not None:
            frames.append(env.render())
        if terminated or truncated:
            break
    return total, steps, success


def run_episodes(
    env_id: str,
    policy: Policy,
    *,
    episodes: int = 100,
    seed: int = 0,
    backend: str = "mujoco",
    env_kwargs: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """Run ``policy`` (observation -> action) for ``episodes`` full episodes, seeds
    ``seed, seed + 1, ...``; an episode succeeds when its last step reports
    ``info["is_success"]`` (what SB3's ``Monitor`` reads). Returns per-episode ``returns``,
    ``lengths``, ``successes`` and their summary (``mean_return``, ``mean_length``,
    ``success_rate`` with its 95 % Wilson interval ``success_low``/``success_high``).
    ``env_kwargs``: more arguments of the env (``config``, ``contact_stiffness``,
    ``physics_dt``, ...)."""
    import gymnasium as gym

    import bcg_envs  # noqa: F401  (registers the ids)
    from bcg_envs.registry import NAMESPACE, short_name

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    env = gym.make(f"{NAMESPACE}/{short_name(env_id)}", **{**(env_kwargs or {}), "backend": backend})
    try:
        returns, lengths, successes = zip(*(episode(env, policy, seed + i) for i in range(episodes)))
    finally:
        env.close()
    out: Dict[str, Any] = {
        "returns": np.asarray(returns),
        "lengths": np.asarray(lengths),
        "successes": np.asarray(successes),
    }
    out.update(
        mean_return=float(np.mean(returns)),
        std_return=float(np.std(returns)),
        mean_length=float(np.mean(lengths)),
        episodes=int(episodes),
        **success_summary(successes),
    )
    return out


def report(env_id: str, result: Dict[str, Any]) -> str:
    """One line: success rate [95 % Wilson interval], mean return, mean episode length."""
    return (
        f"{env_id}: success {format_success(result)} over {result['episodes']} episodes; "
        f"return {result['mean_return']:.1f} ± {result['std_return']:.1f}; "
        f"episode length {result['mean_length']:.1f}"
    )


def main(env_id: str, policies: Dict[str, Callable[[], Policy]], description: str, argv=None) -> Dict[str, Any]:
    """Command line of a task's scripted policies: ``--policy`` (a name of ``policies``,
    each a factory of a fresh policy; the first is the default), ``--episodes``,
    ``--seed``, ``--backend``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--policy", default=next(iter(policies)), choices=list(policies), help="which policy to run")
    parser.add_argument("--episodes", type=int, default=100, help="episodes (seeds seed .. seed + episodes - 1)")
    parser.add_argument("--seed", type=int, default=0, help="first episode seed")
    parser.add_argument("--backend", default="mujoco", choices=["mujoco", "mjx"], help="physics backend")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    result = run_episodes(env_id, policies[args.policy](), episodes=args.episodes, seed=args.seed, backend=args.backend)
    print(report(env_id, result) + f" ({args.policy}; {time.perf_counter() - start:.0f} s, backend={args.backend})")
    return result
