"""Where BoxPush-v0 episodes end: the box's distance and yaw error to the goal at the last step.

    python -m baselines.box_push_endings --out baselines/results/BoxPush-v0/long --steps 2097152

Success needs the box within 2 cm of the goal *and* within 0.2 rad of the goal yaw at the
episode's last step; a return says neither how close a policy gets nor which condition it
misses. For the scripted push (``bcg_envs.envs.box_push.scripted``) and every complete run
of ``baselines.compare`` in ``--out`` with a checkpointed final policy (found as
``baselines.final_scores`` finds them), this runs the comparison's evaluation episodes
(MuJoCo C, reset seeds ``protocol.EVAL_SEED`` onward) through
``bcg_envs.envs.box_push.endings.episode_endings``. Per run, and pooled over an algorithm's seeds: the fraction of
episodes ending within the distance bar, within the yaw bar, within both (the success
rate, with its 95 % Wilson interval), the median final distance (cm) and |yaw error| (rad) with their starting values,
and the fraction ending early (the box left the table).

Writes ``endings.md`` in ``--out`` and prints it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

from baselines import final_scores, protocol
from bcg_envs.stats import format_success, success_summary


def summary_line(name: str, runs: int, e: Dict[str, np.ndarray], config: dict) -> str:
    """One table row of ``episode_endings``' arrays (pooled over runs)."""
    near = e["final_distance"] < config["success_distance"]
    aligned = e["final_yaw"] < config["success_yaw"]
    return (
        f"| {name} | {runs} | {len(near)} | {e['return'].mean():.1f} | {100 * near.mean():.1f} % | {100 * aligned.mean():.1f} % | "
        f"{format_success(success_summary(e['success']))} | {100 * np.median(e['start_distance']):.1f} -> "
        f"{100 * np.median(e['final_distance']):.1f} | {np.median(e['start_yaw']):.2f} -> "
        f"{np.median(e['final_yaw']):.2f} | {100 * np.mean(e['length'] < config['episode_length']):.1f} % |"
    )


def endings_table(out_dir: Path, steps: int, episodes: int = protocol.EVAL_EPISODES) -> str:
    """``endings.md``'s table: the scripted push and every complete checkpointed run in ``out_dir``."""
    from bcg_envs.envs.box_push import scripted
    from bcg_envs.envs.box_push.endings import episode_endings
    from bcg_envs.envs.box_push.push import default_config

    config = default_config()
    policies: Dict[str, Dict[str, Callable]] = {"scripted push": {"scripted push": scripted.scripted_push}}
    for algo, seed, ckpt, _steps in final_scores.final_runs(out_dir, steps):
        policies.setdefault(algo, {})[f"{algo} seed {seed}"] = final_scores.POLICIES[algo](ckpt)
    lines = [
        f"Episode endings on BoxPush-v0's {episodes} evaluation episodes per policy (MuJoCo C), final policies of "
        f"runs at {steps:,} env steps. Bars: distance < {100 * config['success_distance']:.0f} cm, "
        f"|yaw error| < {config['success_yaw']} rad.",
        "",
        "| policy | runs | episodes | return | within distance | within yaw | success | median distance (cm), start -> end "
        "| median abs yaw error (rad), start -> end | ended early |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in policies.items():
        per_run = {run: episode_endings(act, episodes=episodes, seed=protocol.EVAL_SEED) for run, act in runs.items()}
        if len(per_run) > 1:
            lines.extend(summary_line(run, 1, e, config) for run, e in per_run.items())
        pooled = {k: np.concatenate([e[k] for e in per_run.values()]) for k in next(iter(per_run.values()))}
        label = next(iter(per_run)) if len(per_run) == 1 else f"{name}, pooled"
        lines.append(summary_line(label, len(per_run), pooled, config))
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="a folder of baselines.compare BoxPush-v0 runs with checkpoints")
    parser.add_argument(
        "--steps", type=int, required=True, help="the runs' env-step budget (incomplete runs are skipped)"
    )
    parser.add_argument("--episodes", type=int, default=protocol.EVAL_EPISODES)
    args = parser.parse_args(argv)
    out_dir = Path(args.out)
    text = endings_table(out_dir, args.steps, args.episodes)
    (out_dir / "endings.md").write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
