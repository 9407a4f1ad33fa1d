"""The README's main job: gradient statistics of every estimator on BoxPush, a plot and a video.

Runs the scripted pushing policy (``bcg_envs.envs.box_push.scripted``), and at each step
calls ``grad_step`` from the same state with every estimator; prints a table (Jacobian norms, how often bcg bundled, time per
call) and writes ``gradients.png`` and ``rollout.mp4`` to the output folder. The README's
``scripts/demo.sh`` follows it with the training comparison from the repository's
``baselines/`` (SB3 PPO vs SHAC with exact vs SHAC with BCG gradients on BoxPush).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from bcg_envs.envs.box_push.endings import episode_endings
from bcg_envs.envs.box_push.scripted import scripted_push
from bcg_envs.gradients.config import ESTIMATORS
from bcg_envs.stats import format_success, success_summary


def scripted_episodes(episodes: int = 16, seed: int = 0) -> Dict[str, np.ndarray]:
    """Full BoxPush episodes of ``scripted_push`` in MuJoCo C: a hand-written reference
    level for the learned policies' evaluation returns (``episode_endings``' arrays)."""
    return episode_endings(scripted_push, episodes=episodes, seed=seed)


def gradient_statistics(
    steps: int = 40, seed: int = 0, video: Path | None = None, backend: str = "mujoco"
) -> Dict[str, Dict[str, List[float]]]:
    """Jacobian norms, bundling and time of ``grad_step`` per estimator along a scripted push
    on ``backend`` ("mujoco": MuJoCo C, central differences, no compile; "mjx": JAX
    forward mode, one XLA compile of ``grad_step`` per estimator)."""
    import gymnasium as gym

    import bcg_envs  # noqa: F401

    env = gym.make("bcg_envs/BoxPush-v0", backend=backend, render_mode="rgb_array" if video else None, width=320, height=320)
    obs, _ = env.reset(seed=seed)
    stats = {e: {"norm_B": [], "norm_A": [], "bundled": [], "seconds": []} for e in ESTIMATORS}
    frames = []
    for estimator in ESTIMATORS:  # compile every estimator once, outside the timing
        qpos, qvel, _ = env.unwrapped.get_state()
        env.unwrapped.grad_step(np.zeros(2, np.float32), estimator=estimator)
        env.unwrapped.set_state(qpos, qvel)
    for _ in range(steps):
        action = scripted_push(obs)
        qpos, qvel, _ = env.unwrapped.get_state()
        for estimator in ESTIMATORS:
            env.unwrapped.set_state(qpos, qvel)
            t0 = time.perf_counter()
            out = env.unwrapped.grad_step(action, estimator=estimator)
            stats[estimator]["seconds"].append(time.perf_counter() - t0)
            stats[estimator]["norm_A"].append(float(np.linalg.norm(out.jacobians.A)))
            stats[estimator]["norm_B"].append(float(np.linalg.norm(out.jacobians.B)))
            stats[estimator]["bundled"].append(bool(out.info["bundled"]))
        obs = out.observation
        if video:
            frames.append(env.render())
        if out.terminated or out.truncated:
            obs, _ = env.reset()
    env.close()
    if video and frames:
        import warnings

        import imageio

        with warnings.catch_warnings():
            # imageio-ffmpeg starts ffmpeg with fork + exec, which JAX's fork hook warns about;
            # the child runs no JAX code, so the warning's deadlock cannot happen.
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            imageio.mimsave(video, frames, fps=env.unwrapped.metadata["render_fps"])
    return stats


def print_table(stats: Dict[str, Dict[str, List[float]]]) -> str:
    lines = [
        "| estimator | mean ‖A‖_F | max ‖A‖_F | mean ‖B‖_F | bundled steps | ms / grad_step |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in stats.items():
        lines.append(
            f"| {name} | {np.mean(s['norm_A']):.3g} | {np.max(s['norm_A']):.3g} | {np.mean(s['norm_B']):.3g} "
            f"| {np.mean(s['bundled']):.0%} | {1e3 * np.median(s['seconds']):.2f} |"
        )
    table = "\n".join(lines)
    print(table)
    return table


def plot(stats: Dict[str, Dict[str, List[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for name, s in stats.items():
        axes[0].semilogy(s["norm_A"], label=name)
        axes[1].semilogy(s["norm_B"], label=name)
    axes[0].set(title="‖A‖_F = ‖∂x'/∂x‖ along a pushing rollout", xlabel="control step")
    axes[1].set(title="‖B‖_F = ‖∂x'/∂a‖", xlabel="control step")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(out_dir: str = "demo_out", steps: int = 100, seed: int = 0, backend: str = "mujoco") -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(f"BoxPush-v0 ({backend} backend): grad_step with every estimator along a {steps}-step scripted push")
    stats = gradient_statistics(steps=steps, seed=seed, video=out / "rollout.mp4", backend=backend)
    table = print_table(stats)
    (out / "gradients.md").write_text(table + "\n")
    plot(stats, out / "gradients.png")
    print(f"wrote {out / 'gradients.png'}, {out / 'rollout.mp4'}, {out / 'gradients.md'}")
    ref = scripted_episodes(seed=seed)
    print(
        f"scripted push, {len(ref['return'])} full episodes (MuJoCo C): success "
        f"{format_success(success_summary(ref['success']))} (95 % Wilson interval); return "
        f"{ref['return'].mean():.1f} ± {ref['return'].std():.1f}; episode length {ref['length'].mean():.0f}; "
        f"box-goal distance {ref['start_distance'].mean():.3f} m at reset, {ref['final_distance'].mean():.3f} m at the end"
    )
