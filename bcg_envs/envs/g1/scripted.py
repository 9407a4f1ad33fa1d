"""Scripted G1 baselines on MuJoCo C, scored with the tasks' per-episode metrics.

``python -m bcg_envs.envs.g1.scripted [--env G1Squat-v0 ...] [--episodes 20]
[--fixed-start]`` runs, per clip and seeds 0, 1, ...:

* ``replay``: PD targets at the next reference joint pose (``reference_policy``),
  the open-loop scripted tracker;
* ``hold``: PD targets at the default standing pose;
* ``freeze``: PD targets frozen at the episode's start pose (doing nothing);
* ``escape+`` / ``escape-``: every action +1 / -1 (the robot throws itself off the
  reference; the fastest way to end an episode);
* ``trained``: the shipped closed-loop reference policy of the clip (``bcg_envs.export.trained_policy``:
  SB3 PPO, exported to NumPy; the jump, where it tracks better than the open-loop replay);
* ``trained_shac``: the shipped SHAC exact policy of the clip, trained for the same env
  steps as ``trained`` (``trained_policy(env_id, "shac_exact")``; the jump);

and prints mean return, episode length, success rate, mean key-body position error (cm),
mean joint error (rad), falls and clips completed. The MuJoCo C backend maps actions
straight to PD targets, so the envs use ``residual_actions=False``; every policy here is
defined by its PD targets, which are the same in either action mode. The trained policy
acts in residual mode, as it was trained (its observation holds its previous action).
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from bcg_envs.envs.resources import trained_policy_path
from bcg_envs.numpy_policy import NumpyPolicy
from bcg_envs.stats import format_success, success_summary

CLIPS = ("G1Squat-v0", "G1Jump-v0", "G1Kick-v0")
POLICIES = ("replay", "hold", "freeze", "escape+", "escape-", "trained", "trained_shac")

#: The learner of each ``trained*`` policy name (these act in residual mode, as trained).
TRAINED = {"trained": "sb3_ppo", "trained_shac": "shac_exact"}

Policy = Callable[[np.ndarray], Any]


def hold_pose_policy(env: Union[int, Any] = 29) -> Policy:
    """PD targets at the default standing pose ("doing nothing" from a standing start).

    ``env``: the action size (absolute actions: action 0) or a G1 tracking env, whose
    residual mode needs the observation (``-(reference pose - default) / residual_scale``,
    clipped to [-1, 1], so the default pose is reached only within the residual range).
    """
    if isinstance(env, int):
        zero = np.zeros(env, np.float32)
        return lambda obs: zero
    env = getattr(env, "unwrapped", env)
    env = getattr(env, "jax_env", env)
    zero = np.zeros(env.action_size, np.float32)
    if env.residual_scale is None:
        return lambda obs: zero
    sl = env.observation_layout()["ref1_joint_pos"]
    scale = np.asarray(env.residual_scale)
    return lambda obs: np.clip(-np.asarray(obs)[sl] / scale, -1.0, 1.0).astype(np.float32)


def reference_policy(env: Any) -> Policy:
    """The scripted tracker: PD targets at the next reference joint pose (open loop).

    Residual mode: action 0. Absolute mode: ``(reference - default) / action_scale``, read
    from the observation's ``ref1_joint_pos`` (reachable: the scale covers the clip).
    """
    env = getattr(env, "unwrapped", env)
    env = getattr(env, "jax_env", env)
    zero = np.zeros(env.action_size, np.float32)
    if env.residual_scale is not None:
        return lambda obs: zero
    sl = env.observation_layout()["ref1_joint_pos"]
    scale = np.asarray(env.action_scale)
    return lambda obs: np.clip(np.asarray(obs)[sl] / scale, -1.0, 1.0).astype(np.float32)


def episode_summary(final_info: Dict[str, Any]) -> Dict[str, Any]:
    """Reported units of the G1 per-episode metrics from the last step's ``info`` of each
    episode (arrays over episodes of ``G1Track.episode_metrics``): ``tracking_error_cm``
    and ``joint_error_rad`` (means over episodes), ``falls`` and ``completed`` (counts)."""
    return {
        "tracking_error_cm": 100.0 * float(np.mean(final_info["tracking_error"])),
        "joint_error_rad": float(np.mean(final_info["joint_error"])),
        "falls": int(np.sum(final_info["fell"])),
        "completed": int(np.sum(final_info["clip_completed"])),
    }


def _policy_factory(name: str, env, env_id: str) -> Callable[[np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """``first observation -> policy`` (``freeze`` needs the start pose)."""
    jax_env = env.unwrapped.jax_env
    if name == "replay":
        policy = reference_policy(jax_env)
        return lambda obs0: policy
    if name == "hold":
        policy = hold_pose_policy(jax_env)
        return lambda obs0: policy
    if name == "freeze":
        joints = jax_env.observation_layout()["joint_pos"]
        scale = np.asarray(jax_env.action_scale)

        def frozen(obs0):
            a0 = np.clip(np.asarray(obs0)[joints] / scale, -1.0, 1.0).astype(np.float32)
            return lambda obs: a0

        return frozen
    if name in TRAINED:
        policy = NumpyPolicy.load(trained_policy_path(env_id, TRAINED[name]))
        return lambda obs0: policy
    if name in ("escape+", "escape-"):
        a = np.full(jax_env.action_size, 1.0 if name == "escape+" else -1.0, np.float32)
        return lambda obs0: lambda obs: a
    raise ValueError(f"policy must be one of {POLICIES}, got {name!r}")


def run(env_id: str, policy: str, *, episodes: int = 20, seed: int = 0, random_start: bool = True) -> Dict[str, Any]:
    """Episodes of one scripted ``policy`` on ``env_id`` (MuJoCo C); per-episode rows and means.

    Returns ``returns``, ``lengths``, ``success`` (bools), ``tracking_error_cm``,
    ``joint_error_rad``, ``fell``, ``completed`` per episode, and ``mean_return``,
    ``mean_length``, ``success_rate``, ``mean_tracking_error_cm``, ``mean_joint_error_rad``,
    ``falls``, ``completed_episodes``.
    """
    import gymnasium as gym

    import bcg_envs  # noqa: F401  (registers the ids)

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    env = gym.make(
        f"bcg_envs/{env_id}",
        backend="mujoco",
        config={"residual_actions": policy in TRAINED, "random_start": random_start},
    )
    make = _policy_factory(policy, env, env_id)
    rows: Dict[str, List[Any]] = {
        k: [] for k in ("returns", "lengths", "success", "tracking_error_cm", "joint_error_rad", "fell", "completed")
    }
    try:
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + ep)
            act = make(obs)
            total, steps = 0.0, 0
            while True:
                obs, reward, terminated, truncated, info = env.step(act(obs))
                total += float(reward)
                steps += 1
                if terminated or truncated:
                    break
            rows["returns"].append(total)
            rows["lengths"].append(steps)
            rows["success"].append(bool(info["is_success"]))
            rows["tracking_error_cm"].append(100.0 * float(info["tracking_error"]))
            rows["joint_error_rad"].append(float(info["joint_error"]))
            rows["fell"].append(bool(info["fell"]))
            rows["completed"].append(bool(info["clip_completed"]))
    finally:
        env.close()
    out: Dict[str, Any] = {k: np.asarray(v) for k, v in rows.items()}
    out.update(
        mean_return=float(np.mean(rows["returns"])),
        mean_length=float(np.mean(rows["lengths"])),
        success_rate=float(np.mean(rows["success"])),
        mean_tracking_error_cm=float(np.mean(rows["tracking_error_cm"])),
        mean_joint_error_rad=float(np.mean(rows["joint_error_rad"])),
        falls=int(np.sum(rows["fell"])),
        completed_episodes=int(np.sum(rows["completed"])),
        episodes=int(episodes),
    )
    return out


def format_row(env_id: str, policy: str, r: Dict[str, Any]) -> str:
    """One table row; success with its 95 % Wilson interval over the episodes."""
    n = r["episodes"]
    success = format_success(success_summary(r["success"]))
    return (
        f"{env_id:11s} {policy:12s} {r['mean_return']:7.1f} {r['mean_length']:6.1f} {success:>20s} "
        f"{r['mean_tracking_error_cm']:9.1f} {r['mean_joint_error_rad']:9.3f} {r['falls']:>3d}/{n:<3d}"
        f" {r['completed_episodes']:>4d}/{n:<3d}"
    )


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted G1 baselines on MuJoCo C with the per-episode metrics.")
    parser.add_argument("--env", nargs="+", default=list(CLIPS))
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fixed-start", action="store_true", help="start every episode at the clip's first frame")
    parser.add_argument(
        "--plot", default=None, help="also draw the success rates with their 95 %% intervals to this .png"
    )
    args = parser.parse_args(argv)
    start = "first frame" if args.fixed_start else "random frames"
    print(f"MuJoCo C, {args.episodes} episodes from seed {args.seed}, starts at {start}")
    print(
        f"{'env':11s} {'policy':12s} {'return':>7s} {'steps':>6s} {'success [95 % CI]':>20s} {'err cm':>9s} "
        f"{'err rad':>9s} {'falls':>7s} {'complete':>8s}"
    )
    results = []
    for env_id in args.env:
        for policy in args.policies:
            r = run(env_id, policy, episodes=args.episodes, seed=args.seed, random_start=not args.fixed_start)
            print(format_row(env_id, policy, r), flush=True)
            results.append((f"{env_id}\n{policy}", success_summary(r["success"])))
    if args.plot:
        plot_success(results, args.plot, f"MuJoCo C, {args.episodes} episodes from seed {args.seed}")
        print(f"wrote {args.plot}")


def plot_success(results: List[Any], path: str, title: str) -> None:
    """Bar chart of ``(label, success_summary)`` pairs: success rate (%) with its 95 % interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [label for label, _ in results]
    rate = np.array([100 * s["success_rate"] for _, s in results])
    err = np.array(
        [
            [100 * s["success_rate"] - 100 * s["success_low"] for _, s in results],
            [100 * s["success_high"] - 100 * s["success_rate"] for _, s in results],
        ]
    )
    fig, ax = plt.subplots(figsize=(1.8 * len(results) + 1.5, 3.5))
    ax.bar(range(len(results)), rate, yerr=err, capsize=6, color="tab:blue")
    ax.set_xticks(range(len(results)), labels)
    ax.set_ylim(0, 100)
    ax.set_ylabel("success rate (%), 95 % interval")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
