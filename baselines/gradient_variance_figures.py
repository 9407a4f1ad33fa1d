"""Figures of the gradient-variance sweep: variance ratio to exact and raw variance per level, explosions clipped."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from baselines.gradient_variance_contact import CONTACT_MODELS, dt_key
from baselines.gradient_variance_csv import read_rows
from baselines.gradient_variance_gradients import ESTIMATORS
from baselines.gradient_variance_starts import starts_tag

COLORS = {e: f"C{i}" for i, e in enumerate(ESTIMATORS)}
#: Raw variances this many times above exact's largest (or non-finite) are drawn clipped at
#: the top of the raw plot, so that exact itself is never clipped however far it grows.
EXPLODED_OVER_EXACT = 1e3
#: Variance ratios to exact above this (or non-finite) are drawn clipped at the top of the
#: ratio plot, so that the estimators near exact stay readable.
RATIO_EXPLODED = 1e6


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def panel_of(row: dict) -> Tuple[str, str, str, str]:
    """The figures' row of panels a CSV row belongs to: (contact model, options, physics_dt,
    starts' source as ``starts_tag``)."""
    tag = starts_tag(row.get("starts_source", ""))
    return (row["contact_model"], row.get("contact_options") or "", dt_key(row["physics_dt"]), tag)


def panel_title(panel: Tuple[str, str, str, str]) -> str:
    model, options, dt, tag = panel
    return model + (f" [{options}]" if options else "") + (f" dt={dt}" if dt else "") + (f" {tag}" if tag else "")


def _series(
    rows: List[dict], panel: Tuple[str, str, str, str], horizon: int, estimator: str, keys: Sequence[str]
) -> Dict[str, np.ndarray]:
    """Per level (sorted), the values of ``keys`` of one (panel, horizon, estimator) line."""
    sel = [r for r in rows if panel_of(r) == panel and int(r["horizon"]) == horizon and r["estimator"] == estimator]
    sel.sort(key=lambda r: float(r["level"]))
    out = {"level": np.array([float(r["level"]) for r in sel])}
    out.update({k: np.array([_float(r[k]) for r in sel]) for k in keys})
    return out


def _grid(rows: List[dict]):
    """(panels: one per (contact model, options, physics_dt) of ``rows``, horizons, estimators)."""
    order = list(CONTACT_MODELS)
    panels = {panel_of(r) for r in rows if r["contact_model"] in CONTACT_MODELS}
    models = sorted(panels, key=lambda p: (order.index(p[0]), *p[1:]))
    horizons = sorted({int(r["horizon"]) for r in rows})
    estimators = [e for e in ESTIMATORS if any(r["estimator"] == e for r in rows)]
    return models, horizons, estimators


def _axes(plt, models, horizons, title: str):
    fig, axes = plt.subplots(
        len(models), len(horizons), figsize=(3.2 * len(horizons), 2.8 * len(models)), squeeze=False, sharey="row"
    )
    fig.suptitle(title)
    for i, m in enumerate(models):
        for j, h in enumerate(horizons):
            ax = axes[i, j]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{panel_title(m)}, H={h}", fontsize=9)
            ax.set_xlabel(CONTACT_MODELS[m[0]].axis_label, fontsize=8)
    return fig, axes


def tick_labels(ticks: Sequence[float], spacing: float = 1.8) -> List[str]:
    """Labels for ascending log-axis ticks, blank where a tick is within ``spacing`` x of the
    previous labelled one (kappa 200 and 300 would overlap)."""
    labels, last = [], None
    for t in ticks:
        keep = last is None or t / last >= spacing
        labels.append(f"{t:g}" if keep else "")
        last = t if keep else last
    return labels


def _finish(
    fig, axes, rows: List[dict], models: Sequence[str], ylim: Callable[[float, float], Tuple[float, float]]
) -> None:
    """x limits around each panel's levels (stiffer to the right), y limits ``ylim(lo, hi)``."""
    for i, m in enumerate(models):
        levels = [float(r["level"]) for r in rows if panel_of(r) == m]
        lo, hi = min(levels) / 1.6, max(levels) * 1.6
        ticks = sorted(set(levels))
        for ax in axes[i]:
            ax.set_xlim((hi, lo) if CONTACT_MODELS[m[0]].smaller_is_stiffer else (lo, hi))
            ax.set_xticks(ticks, tick_labels(ticks), fontsize=7)
            ax.set_xticks([], minor=True)
            ax.set_ylim(*ylim(*ax.get_ylim()))
    axes[0, -1].legend(fontsize=7)


def _band(ax, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, ok: np.ndarray, color: str) -> None:
    """Shade the interval [lo, hi] over the levels ``x`` (an error bar where one level)."""
    ok = ok & np.isfinite(lo) & np.isfinite(hi) & (lo > 0)
    if np.sum(ok) == 1:
        ax.errorbar(
            x[ok], (lo[ok] + hi[ok]) / 2, yerr=(hi[ok] - lo[ok]) / 2, color=color, alpha=0.4, capsize=3, ls="none"
        )
    elif np.any(ok):
        ax.fill_between(x[ok], lo[ok], hi[ok], color=color, alpha=0.2)


def _clipped_line(
    ax,
    rows: List[dict],
    panel: Tuple[str, str, str, str],
    horizon: int,
    estimator: str,
    keys: Tuple[str, str, str],
    ceiling: float,
    empty_line: bool,
) -> bool:
    """One (panel, horizon, estimator) line of the values ``keys[0]`` per level, shaded over
    their interval [``keys[1]``, ``keys[2]``]; values above ``ceiling`` (or non-finite) drawn
    at ``ceiling`` as triangles. The legend names the line; where no value is in range, the
    line is drawn empty if ``empty_line``, else left out and the legend names the triangles.
    Returns whether any value was clipped."""
    s = _series(rows, panel, horizon, estimator, keys)
    y, lo, hi = (s[k] for k in keys)
    x, color = s["level"], COLORS[estimator]
    bad = ~np.isfinite(y) | (y > ceiling)
    ok = ~bad & (y > 0)
    line = empty_line or bool(np.any(ok))
    if line:
        ax.plot(x[ok], y[ok], marker="o", ms=3, color=color, label=estimator)
    _band(ax, x, lo, np.minimum(hi, ceiling), ok, color)
    if np.any(bad):
        ax.plot(
            x[bad],
            np.full(np.sum(bad), ceiling),
            marker="^",
            ls="none",
            ms=7,
            color=color,
            clip_on=False,
            label=None if line else estimator,
        )
    return bool(np.any(bad))


def plot_ratio(rows: List[dict], path: Path) -> None:
    """Variance ratio to exact per level, a row of horizons per contact model; ratios above
    ``RATIO_EXPLODED`` (or non-finite) drawn at the top of the axis as triangles."""
    import matplotlib.pyplot as plt

    models, horizons, estimators = _grid(rows)
    fig, axes = _axes(plt, models, horizons, f"{rows[0]['env']}: gradient variance / exact's (95 % bootstrap)")
    exploded_any = False
    for i, m in enumerate(models):
        axes[i, 0].set_ylabel("variance ratio to exact")
        for j, h in enumerate(horizons):
            ax = axes[i, j]
            ax.axhline(1.0, color="0.6", lw=0.8, ls="--")
            for e in estimators:
                if e == "exact":
                    continue
                keys = ("variance_ratio", "ratio_lo", "ratio_hi")
                exploded_any |= _clipped_line(ax, rows, m, h, e, keys, RATIO_EXPLODED, empty_line=False)
    _finish(fig, axes, rows, models, lambda lo, hi: (min(lo, 0.3), RATIO_EXPLODED if exploded_any else max(hi, 3.0)))
    if exploded_any:
        fig.text(0.01, 0.005, f"triangles: ratio > {RATIO_EXPLODED:.0e} or non-finite, clipped to the top", fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def raw_ceiling(rows: List[dict]) -> float:
    """Top of the raw-variance plot: ``EXPLODED_OVER_EXACT`` x the largest finite upper bound
    of exact's variance in ``rows`` (1e12 without exact rows)."""
    exact = [_float(r["variance_hi"]) for r in rows if r["estimator"] == "exact"]
    exact = [v for v in exact if np.isfinite(v) and v > 0]
    return EXPLODED_OVER_EXACT * max(exact) if exact else 1e12


def plot_raw(rows: List[dict], path: Path) -> None:
    """Raw gradient variance per level; values above ``raw_ceiling(rows)`` (or non-finite)
    drawn at the top of the axis as triangles."""
    import matplotlib.pyplot as plt

    ceiling = raw_ceiling(rows)
    models, horizons, estimators = _grid(rows)
    fig, axes = _axes(plt, models, horizons, f"{rows[0]['env']}: total variance of the rollout gradient")
    exploded_any = False
    for i, m in enumerate(models):
        axes[i, 0].set_ylabel("variance across starts")
        for j, h in enumerate(horizons):
            ax = axes[i, j]
            for e in estimators:
                keys = ("variance", "variance_lo", "variance_hi")
                exploded_any |= _clipped_line(ax, rows, m, h, e, keys, ceiling, empty_line=True)
    _finish(fig, axes, rows, models, lambda lo, hi: (lo, ceiling if exploded_any else hi))
    if exploded_any:
        fig.text(
            0.01,
            0.005,
            f"triangles: variance > {ceiling:.0e} ({EXPLODED_OVER_EXACT:g}x exact's largest) or non-finite, "
            "clipped to the top",
            fontsize=8,
        )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_figures(out_dir: Path) -> None:
    """Both figures from every row of the CSV in ``out_dir``."""
    import matplotlib

    matplotlib.use("Agg")
    rows = read_rows(out_dir)
    if rows:
        plot_ratio(rows, out_dir / "gradient_variance_ratio.png")
        plot_raw(rows, out_dir / "gradient_variance_raw.png")
