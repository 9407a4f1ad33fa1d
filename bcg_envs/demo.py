"""The README's demo (``bcg-envs demo``; ``bash scripts/demo.sh`` sets up ``.venv`` first).

Three sections, each printed under a heading, then a three-line summary:

1. **gradients**: along a scripted BoxPush push (``bcg_envs.envs.box_push.scripted``), every
   estimator's ``grad_step`` from the same states; a table (Jacobian norms, how often
   ``bcg`` bundled, time per call), ``gradients.png`` and ``rollout.mp4``;
2. **boxpush**: the shipped BoxPush policies of SB3 PPO and SHAC exact (the same env steps
   each) on the comparison's evaluation episodes (MuJoCo C), beside the scripted push and
   doing nothing; ``boxpush_success.png`` and ``boxpush_policies.mp4`` (side by side);
3. **g1jump**: the shipped G1Jump policies of SB3 PPO and SHAC exact, beside the open-loop
   reference replay and a frozen pose; ``g1jump_success.png``.

No training runs here: the learning comparison (SB3 PPO, SHAC exact, SHAC bcg at 2M env
steps) takes hours on a CPU; ``baselines/`` runs it and holds its results.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from bcg_envs.envs.box_push.endings import episode_endings
from bcg_envs.envs.box_push.scripted import do_nothing, scripted_push
from bcg_envs.gradients.registry import ESTIMATORS
from bcg_envs.stats import format_success, success_summary

#: The demo's sections, in the order they run.
SECTIONS = ("gradients", "boxpush", "g1jump")
#: Display names of the learners of the shipped policies (``trained_policy``'s keys).
LEARNERS = {"sb3_ppo": "SB3 PPO", "shac_exact": "SHAC exact", "shac_bcg": "SHAC bcg"}
#: Env steps each shipped policy was trained for, per env (docs/environments.md).
SHIPPED_ENV_STEPS = {"BoxPush-v0": 2_097_152, "G1Jump-v0": 262_144}
#: First reset seed of the BoxPush episodes: ``baselines.compare``'s evaluation episodes.
BOXPUSH_SEED = 1_000_000


def heading(number: int, total: int, title: str) -> None:
    """Print a section heading."""
    line = f"[{number}/{total}] {title}"
    print(f"\n{line}\n{'=' * len(line)}", flush=True)


def scripted_episodes(episodes: int = 16, seed: int = 0) -> Dict[str, np.ndarray]:
    """Full BoxPush episodes of ``scripted_push`` in MuJoCo C: a hand-written reference
    level for the learned policies' evaluation returns (``episode_endings``' arrays)."""
    return episode_endings(scripted_push, episodes=episodes, seed=seed)


# ----- 1. gradients ---------------------------------------------------------------------
def gradient_statistics(
    steps: int = 40, seed: int = 0, video: Path | None = None, backend: str = "mujoco"
) -> Tuple[Dict[str, Dict[str, List[float]]], Dict[str, List[Any]]]:
    """Jacobian norms, bundling and time of ``grad_step`` per estimator along a scripted push
    on ``backend`` ("mujoco": MuJoCo C, central differences, no compile; "mjx": JAX
    forward mode, one XLA compile of ``grad_step`` per estimator).

    Every control step restores the state (with its episode step counter) before each
    estimator's call, so the episode advances one step per control step. Returns
    ``(stats, trace)``: per estimator the lists ``norm_A``, ``norm_B``, ``bundled`` and
    ``seconds``; per control step the episode's ``step`` counter and whether the episode
    ``ended`` (terminated or truncated) there.
    """
    import gymnasium as gym

    import bcg_envs  # noqa: F401

    env = gym.make(
        "bcg_envs/BoxPush-v0", backend=backend, render_mode="rgb_array" if video else None, width=320, height=320
    )
    sim = env.unwrapped
    try:
        obs, _ = env.reset(seed=seed)
        stats = {e: {"norm_B": [], "norm_A": [], "bundled": [], "seconds": []} for e in ESTIMATORS}
        trace: Dict[str, List[Any]] = {"step": [], "ended": []}
        frames = []
        start = sim.get_state()
        for estimator in ESTIMATORS:  # compile every estimator once, outside the timing
            sim.set_state(*start, step=start.step)
            sim.grad_step(np.zeros(2, np.float32), estimator=estimator)
        sim.set_state(*start, step=start.step)
        for _ in range(steps):
            action = scripted_push(obs)
            state = sim.get_state()
            for estimator in ESTIMATORS:
                sim.set_state(*state, step=state.step)
                t0 = time.perf_counter()
                out = sim.grad_step(action, estimator=estimator)
                stats[estimator]["seconds"].append(time.perf_counter() - t0)
                stats[estimator]["norm_A"].append(float(np.linalg.norm(out.jacobians.A)))
                stats[estimator]["norm_B"].append(float(np.linalg.norm(out.jacobians.B)))
                stats[estimator]["bundled"].append(bool(out.info["bundled"]))
            obs = out.observation
            ended = bool(out.terminated or out.truncated)
            trace["step"].append(int(out.info["step"]))
            trace["ended"].append(ended)
            if video:
                frames.append(env.render())
            if ended:
                obs, _ = env.reset()
    finally:
        env.close()
    if video and frames:
        write_video(video, frames, fps=env.unwrapped.metadata["render_fps"])
    return stats, trace


def write_video(path: Path, frames: Sequence[np.ndarray], fps: int) -> None:
    """Write RGB ``frames`` as an mp4 (imageio-ffmpeg)."""
    import warnings

    import imageio

    with warnings.catch_warnings():
        # imageio-ffmpeg starts ffmpeg with fork + exec, which JAX's fork hook warns about;
        # the child runs no JAX code, so the warning's deadlock cannot happen.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        imageio.mimsave(path, list(frames), fps=fps)


def print_table(stats: Dict[str, Dict[str, List[float]]]) -> str:
    """Print and return the gradient table (markdown)."""
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
    """``‖A‖_F`` and ``‖B‖_F`` of every estimator per control step, log scale."""
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


def gradients_section(out: Path, steps: int, seed: int, backend: str, video: bool = True) -> Dict[str, Any]:
    """Section 1: the gradient table, plot and video; returns the per-estimator stats."""
    print(
        f"BoxPush-v0 ({backend} backend): grad_step with every estimator ({', '.join(ESTIMATORS)}) from the "
        f"same states along a {steps}-step scripted push. bcg bundles (smooths) only at steps with a "
        "contact force above the task's threshold and is exact elsewhere.",
        flush=True,
    )
    stats, trace = gradient_statistics(
        steps=steps, seed=seed, video=out / "rollout.mp4" if video else None, backend=backend
    )
    table = print_table(stats)
    (out / "gradients.md").write_text(table + "\n")
    plot(stats, out / "gradients.png")
    ended = sum(trace["ended"])
    print(f"episode: {trace['step'][-1]} steps counted, {ended} episode end(s) along the push")
    print(f"wrote {out / 'gradients.md'}, {out / 'gradients.png'}" + (f", {out / 'rollout.mp4'}" if video else ""))
    return {"stats": stats, "trace": trace}


def gradient_summary(stats: Dict[str, Dict[str, List[float]]]) -> str:
    """One line on bcg against exact and bundle: where bcg bundled, its ‖A‖ there, and the
    median cost per call."""
    exact, bcg = stats["exact"], stats["bcg"]
    bundled = np.asarray(bcg["bundled"], bool)
    ms = {name: 1e3 * np.median(stats[name]["seconds"]) for name in ("exact", "bcg", "bundle")}
    cost = (
        f"median ms per grad_step: bcg {ms['bcg']:.1f}, exact {ms['exact']:.1f}, "
        f"bundle (perturbs every step) {ms['bundle']:.1f}"
    )
    if not bundled.any():
        return f"Gradients: bcg never bundled along the push (no contact force above the threshold), so it equals exact; {cost}."
    a_exact = np.asarray(exact["norm_A"])[bundled].mean()
    a_bcg = np.asarray(bcg["norm_A"])[bundled].mean()
    return (
        f"Gradients: bcg bundled at {bundled.sum()} of {bundled.size} steps (contact above the threshold; "
        f"mean ‖A‖_F there {a_bcg:.3g}, exact {a_exact:.3g}) and is exact elsewhere; {cost}."
    )


# ----- 2./3. shipped policies --------------------------------------------------------
def plot_success(
    rows: Sequence[Tuple[str, Dict[str, float]]], references: Sequence[Tuple[str, float]], path: Path, title: str
) -> None:
    """Bars of ``(label, success_summary)`` (success %, 95 % Wilson interval) with the
    ``(label, success rate)`` references as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rate = np.array([100 * s["success_rate"] for _, s in rows])
    err = np.array(
        [
            [100 * (s["success_rate"] - s["success_low"]) for _, s in rows],
            [100 * (s["success_high"] - s["success_rate"]) for _, s in rows],
        ]
    )
    fig, ax = plt.subplots(figsize=(2.0 * len(rows) + 3.5, 3.6))
    ax.bar(range(len(rows)), rate, yerr=err, capsize=6, color=["tab:blue", "tab:orange", "tab:green"][: len(rows)])
    for (label, value), style in zip(references, ("--", ":", "-.")):
        ax.axhline(100 * value, color="0.3", linestyle=style, linewidth=1.2, label=f"{label}: {100 * value:.0f} %")
    ax.set_xticks(range(len(rows)), [label for label, _ in rows])
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylim(-3, 105)  # a 0 % reference line stays visible above the axis
    ax.set_ylabel("success rate (%), 95 % interval")
    ax.set_title(title, fontsize=10)
    if references:
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _row(label: str, successes: Sequence[bool], returns: Sequence[float], lengths: Sequence[float]) -> str:
    return (
        f"{label:20s} {format_success(success_summary(successes)):>22s} {np.mean(returns):8.1f} {np.mean(lengths):7.1f}"
    )


def _labelled(frame: np.ndarray, text: str) -> np.ndarray:
    """``frame`` with ``text`` written in its top-left corner."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(frame)
    draw = ImageDraw.Draw(image)
    draw.rectangle(draw.textbbox((8, 6), text), fill=(0, 0, 0))
    draw.text((8, 6), text, fill=(255, 255, 255))
    return np.asarray(image)


def side_by_side_video(path: Path, policies: Dict[str, Any], seed: int) -> None:
    """One BoxPush episode (reset seed ``seed``) of each policy, rendered side by side into
    ``path``; the shorter episode holds its last frame."""
    import gymnasium as gym

    from bcg_envs.envs.evaluation import episode
    from bcg_envs.registry import NAMESPACE

    env = gym.make(f"{NAMESPACE}/BoxPush-v0", backend="mujoco", render_mode="rgb_array", width=320, height=320)
    clips = []
    try:
        for label, policy in policies.items():
            frames: List[np.ndarray] = []
            episode(env, policy, seed, frames=frames)
            clips.append([_labelled(f, label) for f in frames])
        fps = env.unwrapped.metadata["render_fps"]
    finally:
        env.close()
    n = max(len(c) for c in clips)
    joined = [np.concatenate([c[min(i, len(c) - 1)] for c in clips], axis=1) for i in range(n)]
    write_video(path, joined, fps=fps)


def boxpush_section(out: Path, episodes: int, video: bool = True) -> Dict[str, Any]:
    """Section 2: the shipped BoxPush policies with the scripted and do-nothing references."""
    from bcg_envs.envs.evaluation import run_episodes
    from bcg_envs.export import trained_policy

    env_id = "BoxPush-v0"
    print(
        f"The shipped policies of SB3 PPO and SHAC exact ({SHIPPED_ENV_STEPS[env_id]:,} env steps each) on "
        f"{episodes} episodes (reset seeds from {BOXPUSH_SEED:,}, MuJoCo C), beside the scripted push and "
        "doing nothing. Success: the box within 2 cm and 0.2 rad of the goal at the episode's end.",
        flush=True,
    )
    policies = {
        LEARNERS["sb3_ppo"]: trained_policy(env_id, "sb3_ppo"),
        LEARNERS["shac_exact"]: trained_policy(env_id, "shac_exact"),
    }
    references = {"scripted push": scripted_push, "do nothing": do_nothing}
    print(f"{'policy':20s} {'success [95 % CI]':>22s} {'return':>8s} {'steps':>7s}")
    results: Dict[str, Dict[str, Any]] = {}
    for label, policy in {**policies, **references}.items():
        r = run_episodes(env_id, policy, episodes=episodes, seed=BOXPUSH_SEED, backend="mujoco")
        results[label] = r
        print(_row(label, r["successes"], r["returns"], r["lengths"]), flush=True)
    plot_success(
        [(label, results[label]) for label in policies],
        [(label, results[label]["success_rate"]) for label in references],
        out / "boxpush_success.png",
        f"BoxPush-v0: shipped policies, {episodes} episodes (MuJoCo C)",
    )
    written = [out / "boxpush_success.png"]
    if video:
        side_by_side_video(out / "boxpush_policies.mp4", policies, seed=BOXPUSH_SEED)
        written.append(out / "boxpush_policies.mp4")
    print(f"wrote {', '.join(str(p) for p in written)}" + (f" (left: {', right: '.join(policies)})" if video else ""))
    print(
        f"Not rerun here (tens of minutes per run on a CPU): the learning comparison behind these policies, "
        f"{LEARNERS['sb3_ppo']}, {LEARNERS['shac_exact']} and {LEARNERS['shac_bcg']} at "
        f"{SHIPPED_ENV_STEPS[env_id]:,} env steps, 3 seeds: python -m baselines.compare --env {env_id} "
        f"--algos sb3_ppo shac_exact shac_bcg --seeds 0 1 2 --steps {SHIPPED_ENV_STEPS[env_id]} --evals 32 "
        "--out runs/boxpush (from the repository; results in baselines/results/BoxPush-v0/long)."
    )
    return results


def g1jump_section(out: Path, episodes: int) -> Dict[str, Any]:
    """Section 3: the shipped G1Jump policies with the replay and freeze references."""
    from bcg_envs.envs.g1 import scripted as g1

    env_id = "G1Jump-v0"
    print(
        f"The shipped policies of SB3 PPO and SHAC exact ({SHIPPED_ENV_STEPS[env_id]:,} env steps each) on "
        f"{episodes} episodes (MuJoCo C, random start frames), beside the open-loop replay of the reference "
        "clip and holding the start pose. Success: the episode reaches its end without a fall, with a mean "
        "key-body error below 10 cm.",
        flush=True,
    )
    names = {
        "trained": LEARNERS["sb3_ppo"],
        "trained_shac": LEARNERS["shac_exact"],
        "replay": "replay (scripted)",
        "freeze": "freeze (do nothing)",
    }
    print(f"{'policy':20s} {'success [95 % CI]':>22s} {'return':>8s} {'steps':>7s}")
    results: Dict[str, Dict[str, Any]] = {}
    for name, label in names.items():
        r = g1.run(env_id, name, episodes=episodes, seed=0)
        results[label] = r
        print(_row(label, r["success"], r["returns"], r["lengths"]), flush=True)
    learned, refs = list(names.values())[:2], list(names.values())[2:]
    plot_success(
        [(label, success_summary(results[label]["success"])) for label in learned],
        [(label, results[label]["success_rate"]) for label in refs],
        out / "g1jump_success.png",
        f"G1Jump-v0: shipped policies, {episodes} episodes (MuJoCo C)",
    )
    print(f"wrote {out / 'g1jump_success.png'}")
    return results


def policy_summary(env_id: str, results: Dict[str, Dict[str, Any]], references: Sequence[str]) -> str:
    """One line: the learners' success rates, which leads, and the references'."""
    learned = [label for label in results if label not in references]
    rates = {
        label: success_summary(results[label]["successes" if "successes" in results[label] else "success"])
        for label in results
    }
    best = max(learned, key=lambda label: rates[label]["success_rate"])
    other = [label for label in learned if label != best]
    if all(rates[best]["success_low"] > rates[o]["success_high"] for o in other):
        verdict = f"{best} ahead beyond the 95 % intervals"
    else:
        verdict = "the 95 % intervals overlap: no clear winner at this many episodes"
    parts = ", ".join(f"{label} {100 * rates[label]['success_rate']:.0f} %" for label in learned)
    refs = ", ".join(f"{label} {100 * rates[label]['success_rate']:.0f} %" for label in references)
    line = f"{env_id}: at the same {SHIPPED_ENV_STEPS[env_id]:,} env steps {parts} ({verdict})"
    return f"{line}; references: {refs}." if references else f"{line}."


def main(
    out_dir: str = "demo_out",
    steps: int = 100,
    seed: int = 0,
    backend: str = "mujoco",
    sections: Sequence[str] = SECTIONS,
    boxpush_episodes: int = 64,
    g1jump_episodes: int = 192,
    video: bool = True,
) -> List[str]:
    """Run the demo's ``sections`` into ``out_dir``; prints them and returns the closing
    summary (one line per section run)."""
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise ValueError(f"sections must be among {SECTIONS}, got {unknown}")
    for name, value in (("steps", steps), ("boxpush_episodes", boxpush_episodes), ("g1jump_episodes", g1jump_episodes)):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in SECTIONS if s in sections]
    start = time.perf_counter()
    summary: List[str] = []
    for number, name in enumerate(chosen, 1):
        if name == "gradients":
            heading(number, len(chosen), "Gradients of every estimator along a scripted BoxPush push")
            summary.append(gradient_summary(gradients_section(out, steps, seed, backend, video)["stats"]))
        elif name == "boxpush":
            heading(number, len(chosen), "BoxPush: shipped SB3 PPO and SHAC exact policies")
            summary.append(
                policy_summary(
                    "BoxPush-v0", boxpush_section(out, boxpush_episodes, video), ["scripted push", "do nothing"]
                )
            )
        else:
            heading(number, len(chosen), "G1Jump: shipped SB3 PPO and SHAC exact policies")
            summary.append(
                policy_summary(
                    "G1Jump-v0", g1jump_section(out, g1jump_episodes), ["replay (scripted)", "freeze (do nothing)"]
                )
            )
    title = f"Summary ({time.perf_counter() - start:.0f} s)"
    print(f"\n{title}\n{'=' * len(title)}")
    for line in summary:
        print(line)
    (out / "summary.txt").write_text("\n".join(summary) + "\n")
    return summary
