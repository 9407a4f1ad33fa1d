"""The summaries of a comparison's runs: env steps to a level, best success, the table, the curves figure."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from baselines import cpu_clock
from baselines.run_csv import Row
from bcg_envs.stats import format_success, wilson_interval


def steps_to_reach(rows: List[Row], target: float, key: str = "eval_return") -> Optional[float]:
    """Env steps of the first row whose ``key`` reaches ``target`` (None if none does)."""
    for row in rows:
        if row[key] >= target:
            return row["env_steps"]
    return None


def median_steps_to(seeds: List[List[Row]], target: float, key: str) -> Tuple[Optional[float], int]:
    """(median over the seeds that reach ``target`` of their env steps to it, how many do)."""
    hits = [h for h in (steps_to_reach(r, target, key) for r in seeds) if h is not None]
    return (float(np.median(hits)) if hits else None), len(hits)


def best_success(runs: Dict[str, List[List[Row]]]) -> float:
    """The highest seed-mean success rate any algorithm reached at any evaluation point."""
    best = 0.0
    for seeds in runs.values():
        by_step: Dict[float, List[float]] = defaultdict(list)
        for rows in seeds:
            for row in rows:
                if not math.isnan(row["eval_success"]):
                    by_step[row["env_steps"]].append(row["eval_success"])
        for values in by_step.values():
            if len(values) == len(seeds):
                best = max(best, float(np.mean(values)))
    return best


def _steps_text(value: Optional[float], hits: int, seeds: int) -> str:
    return f"{value:,.0f} ({hits}/{seeds})" if value is not None else f"— (0/{seeds})"


def _by_wall_clock(rows: List[Row]) -> List[Row]:
    """The rows with their wall-clock as the step axis (for ``median_steps_to``)."""
    return [{**row, "env_steps": row["wall_clock"]} for row in rows]


#: The PPO implementations, in the order the gap table (``seed_stats.gap_table``) pairs them.
PPO_ALGORITHMS = ("sb3_ppo", "brax_ppo")


def summary_table(runs: Dict[str, List[List[Row]]], reference: str = "sb3_ppo") -> str:
    """Markdown: final return (mean +- std over seeds), final success rate with its 95 %
    Wilson interval (all seeds' evaluation episodes pooled; '—' if not recorded),
    final episode length, env steps to 90 % of the way from the worst initial return to the
    reference's (PPO's) final return, env steps to
    50 % and 90 % of the best success any algorithm reached (medians over the seeds that
    reach it, how many do), simulated control steps, wall-clock to the end and to the two
    success levels (medians over the seeds that reach them, "(k/n)" where not every seed
    does; only where every seed ran alone on its CPUs, unresumed, ``cpu_clock.ran_alone``: otherwise
    the end's wall-clock is marked "shared" and the levels' are "—"), and the run's own
    CPU time. PPO's steps over SHAC's, with every seed counted (a seed that never reaches a
    level as inf) and an interval: ``seed_stats.gap_table``."""
    ref = runs.get(reference) or runs.get("brax_ppo")
    target = None
    if ref:
        ref_final = float(np.mean([r[-1]["eval_return"] for r in ref]))
        # 90% of the way from the worst initial return to the reference's final return.
        initial = min(r[0]["eval_return"] for seeds in runs.values() for r in seeds)
        target = initial + 0.9 * (ref_final - initial)
    best = best_success(runs)
    levels = (0.5, 0.9)
    lines = [
        "| algorithm | seeds | final return | final success [95% CI] | episode length | env steps to 90% of PPO "
        "| env steps to 50% of best success | env steps to 90% of best success | simulated steps | wall-clock (s) "
        "| wall-clock to 50% / 90% of best success (s) | CPU time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for algo, seeds in runs.items():
        finals = np.array([r[-1]["eval_return"] for r in seeds])
        wall = np.mean([r[-1]["wall_clock"] for r in seeds])
        alone = cpu_clock.ran_alone(seeds)
        wall_text = f"{wall:.0f}" if alone else f"{wall:.0f} (shared)"
        cpu = np.array([r[-1]["cpu_time"] for r in seeds], float)
        cpu_text = f"{cpu.mean():.0f}" if np.all(np.isfinite(cpu)) else "—"
        wall_cells = []
        reach = "—" if target is None else _steps_text(*median_steps_to(seeds, target, "eval_return"), len(seeds))
        success_cells = []
        for level in levels:
            if best > 0:
                value, hits = median_steps_to(seeds, level * best, "eval_success")
                success_cells.append(_steps_text(value, hits, len(seeds)))
                seconds, hits = median_steps_to([_by_wall_clock(r) for r in seeds], level * best, "eval_success")
                reached = "" if hits == len(seeds) else f" ({hits}/{len(seeds)})"
                wall_cells.append(f"{seconds:.0f}{reached}" if alone and seconds is not None else "—")
            else:
                success_cells.append("— (no success)")
                wall_cells.append("—")
        success = np.array([r[-1]["eval_success"] for r in seeds])
        episodes = np.array([r[-1]["eval_episodes"] for r in seeds])
        if not np.isnan(success).any():
            n = int(np.sum(episodes))
            k = int(round(float(np.sum(success * episodes))))
            low, high = wilson_interval(k, n)
            success_text = format_success({"success_rate": k / n, "success_low": low, "success_high": high})
        else:
            success_text = "—"
        lengths = np.array([r[-1]["eval_length"] for r in seeds])
        length_text = f"{np.nanmean(lengths):.0f}" if np.any(~np.isnan(lengths)) else "—"
        sims = np.array([r[-1]["sim_steps"] for r in seeds])
        sims_text = f"{np.mean(sims):,.0f}" if np.all(~np.isnan(sims)) else "—"
        lines.append(
            f"| {algo} | {len(seeds)} | {finals.mean():.2f} ± {finals.std():.2f} | {success_text} | {length_text} "
            f"| {reach} | {success_cells[0]} | {success_cells[1]} | {sims_text} | {wall_text} "
            f"| {' / '.join(wall_cells)} | {cpu_text} |"
        )
    lines.append("")
    lines.append(f"Best success (seed mean at one evaluation, any algorithm): {100 * best:.1f} %.")
    return "\n".join(lines)


#: One colour per algorithm, the same in every figure (matplotlib's default cycle, fixed).
ALGORITHM_COLORS = {"sb3_ppo": "C0", "brax_ppo": "C1", "shac_exact": "C2", "shac_bcg": "C3", "brax_apg": "C4"}
#: Line styles of the reference policies' levels (``plot_curves``'s ``references``), by name.
REFERENCE_STYLES = {"do nothing": dict(color="0.35", linestyle=":"), "scripted": dict(color="0.1", linestyle="-.")}


def algorithm_color(algo: str) -> str:
    """The colour of ``algo`` in every figure (grey for a name outside ``ALGORITHM_COLORS``)."""
    return ALGORITHM_COLORS.get(algo, "0.5")


def plot_curves(
    runs: Dict[str, List[List[Row]]],
    path: Path,
    title: str = "",
    budget: Optional[int] = None,
    references: Optional[Dict[str, Tuple[float, float]]] = None,
) -> None:
    """Return against env steps, simulated steps and wall-clock (mean +- std over seeds) and
    success against env steps; whole runs, with the table's ``budget`` (env steps) dashed.
    Each algorithm keeps its ``ALGORITHM_COLORS`` colour; every panel has a legend.
    ``references``: name -> (return, success rate) of fixed policies on the same evaluation
    episodes (do nothing, a scripted controller), drawn as horizontal lines (styles from
    ``REFERENCE_STYLES`` by the name's first words)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 4, figsize=(21, 4.2))
    for algo, seeds in runs.items():
        color = algorithm_color(algo)
        for ax, key in zip(axes, ("env_steps", "sim_steps", "wall_clock")):
            if any(np.isnan(row[key]) for r in seeds for row in r):
                continue  # CSVs from before the simulated-steps axis
            grid = np.linspace(0, min(r[-1][key] for r in seeds), 50)
            curves = np.stack(
                [np.interp(grid, [row[key] for row in r], [row["eval_return"] for row in r]) for r in seeds]
            )
            mean, std = curves.mean(0), curves.std(0)
            ax.plot(grid, mean, color=color, label=f"{algo} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})")
            ax.fill_between(grid, mean - std, mean + std, color=color, alpha=0.2)
        # Success: the evaluations that recorded it (markers; a line where there are several).
        points = [
            (row["env_steps"], row["eval_success"]) for r in seeds for row in r if not np.isnan(row["eval_success"])
        ]
        if points:
            steps_, rates = (np.array(v) for v in zip(*sorted(points)))
            uniq = np.unique(steps_)
            axes[3].plot(
                uniq, [rates[steps_ == u].mean() for u in uniq], marker="o", markersize=3, color=color, label=algo
            )
    for name, (ret, success) in (references or {}).items():
        style = next((s for k, s in REFERENCE_STYLES.items() if name.startswith(k)), dict(color="0.6", linestyle="-"))
        for ax in axes[:3]:
            ax.axhline(ret, linewidth=1, label=f"{name} ({ret:.1f})", **style)
        if not np.isnan(success):
            axes[3].axhline(success, linewidth=1, label=f"{name} ({100 * success:.0f} %)", **style)
    if budget is not None:
        for ax in (axes[0], axes[3]):
            ax.axvline(budget, color="grey", linestyle="--", linewidth=1, label="budget of the table")
    axes[0].set(xlabel="environment steps", ylabel="evaluation return", title=title)
    axes[1].set(xlabel="simulated control steps (forward + backward)", ylabel="evaluation return")
    axes[2].set(xlabel="wall-clock (s)", ylabel="evaluation return")
    axes[3].set(xlabel="environment steps", ylabel="success rate", ylim=(-0.05, 1.05))
    for ax in (axes[0], axes[1], axes[3]):
        ax.xaxis.set_major_formatter(matplotlib.ticker.EngFormatter())  # 50k, not 50000
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
