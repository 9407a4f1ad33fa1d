"""Tables of the gradient-variance sweep on the results page: one row per stiffness level
(``gradient_table``), per variant of a contact model (``decomposition_table``) or per source of
start states (``starts_table``), read from a sweep folder's ``gradient_variance.csv``."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from baselines.comparisons import RESULTS
from baselines.page_format import number, with_interval

#: A mean gradient norm at which an estimator's rollout gradients have reached float32's
#: range (largest finite value 3.4e38): there the backward pass zeroes each step whose
#: derivative overflows, so the gradients are clipped, and their variance is not a measurement.
FLOAT32_SATURATED = 1e36


def _measured(row: dict, value: str, low: str, high: str) -> str:
    """``value [low, high]`` of ``row``, or "float32 overflow" where its gradients saturated."""
    if number(row["mean_grad_norm"]) >= FLOAT32_SATURATED:
        return "float32 overflow"
    return with_interval(row, value, low, high)


def _gradient_head(first: str, others: Sequence[str]) -> List[str]:
    head = [
        first,
        "starts",
        "exact H=8",
        "exact H=32",
        "exact H=64",
        "exact cosine H=64",
        "bcg/exact H=32",
        "bcg/exact H=64",
        "bcg steps bundled, H=8-64",
    ] + [f"{e}/exact H=64" for e in others]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]


def _gradient_cells(rows: Sequence[dict], others: Sequence[str]) -> List[str]:
    """The cells after the first of one block of gradient-variance rows (one contact model,
    options, timestep and level): see ``gradient_table``."""

    def cell(estimator: str, horizon: int) -> Optional[dict]:
        hits = [r for r in rows if r["estimator"] == estimator and int(r["horizon"]) == horizon]
        return hits[0] if hits else None

    ex = {h: cell("exact", h) for h in (8, 32, 64)}
    bcg = {h: cell("bcg", h) for h in (8, 32, 64)}
    fractions = [100 * number(r["bundled_fraction"]) for r in bcg.values() if r]
    bundled = "—"
    if fractions:
        low, high = min(fractions), max(fractions)
        bundled = f"{low:.0f}-{high:.0f} %" if round(low) != round(high) else f"{low:.0f} %"
    cells = [ex[64]["starts"] if ex[64] else "—"]
    cells += [_measured(ex[h], "variance", "variance_lo", "variance_hi") if ex[h] else "—" for h in (8, 32, 64)]
    cells.append(f"{number(ex[64]['cosine_to_reference']):.2f}" if ex[64] else "—")
    cells += [_measured(bcg[h], "variance_ratio", "ratio_lo", "ratio_hi") if bcg[h] else "—" for h in (32, 64)]
    cells.append(bundled)
    for e in others:
        r = cell(e, 64)
        cells.append(_measured(r, "variance_ratio", "ratio_lo", "ratio_hi") if r else "—")
    return cells


def gradient_table(env_id: str, model: str, options: str = "") -> str:
    """One row per stiffness level of ``model`` in ``<env>/gradient_variance.csv`` (``env_id``
    may name a sweep folder under the env's, e.g. ``BoxPush-v0/moreau_decomposition``), as
    built or with the ``contact_options`` variant ``options`` (as the CSV records it, e.g.
    ``baumgarte=0``):
    exact's total variance across starts (bootstrap 95 % interval) at H = 8, 32, 64 and its
    cosine to the smoothed reference at H = 64; bcg's variance ratio to exact (paired
    bootstrap) at H = 32, 64 and the range of its bundled fraction over H = 8, 32, 64; the
    other estimators' ratio at H = 64 where measured."""
    from baselines import gradient_variance_csv as gv_csv
    from baselines import gradient_variance_starts as gv_starts

    # One variant (as built: none), and the timestep of the first block measured (a
    # sweep's other timesteps are variants: ``decomposition_table``).
    rows = [
        r
        for r in gv_csv.read_rows(RESULTS / env_id)
        if r["contact_model"] == model
        and (r.get("contact_options") or "") == options
        and not gv_starts.starts_tag(r.get("starts_source"))
    ]
    rows = [r for r in rows if r.get("physics_dt") == rows[0].get("physics_dt")] if rows else rows
    levels = sorted({float(r["level"]) for r in rows}, reverse=model == "mujoco")
    others = [e for e in ("bundle", "zeroth", "alpha") if any(r["estimator"] == e for r in rows)]
    lines = _gradient_head("solref time constant (s)" if model == "mujoco" else "kappa (1/m)", others)
    for level in levels:
        block = [r for r in rows if float(r["level"]) == level]
        lines.append("| " + " | ".join([f"{level:g}"] + _gradient_cells(block, others)) + " |")
    return "\n".join(lines)


def decomposition_table(sweep: str, model: str, level: str) -> str:
    """One row per variant of ``model`` at stiffness ``level`` in ``<sweep>/gradient_variance.csv``:
    the model as built, then each ``contact_options`` variant and each other physics
    timestep, in the order they were measured; the columns of ``gradient_table`` and exact's
    H = 64 variance relative to the model as built (point estimates; the intervals of the
    two variances are in their own columns)."""
    from baselines import gradient_variance_csv as gv_csv
    from baselines import gradient_variance_starts as gv_starts

    rows = [
        r
        for r in gv_csv.read_rows(RESULTS / sweep)
        if r["contact_model"] == model
        and float(r["level"]) == float(level)
        and not gv_starts.starts_tag(r.get("starts_source"))  # the scripted starts
    ]
    variants: List[Tuple[str, str]] = []
    for r in rows:
        key = (r.get("contact_options") or "", r.get("physics_dt") or "")
        if key not in variants:
            variants.append(key)
    variants.sort(key=lambda v: v != ("", ""))  # the model as built first
    lines = _gradient_head("variant", [])
    lines[0] += " exact H=64 / as built |"
    lines[1] += "---|"

    def exact64(block: Sequence[dict]) -> Optional[float]:
        hits = [number(r["variance"]) for r in block if r["estimator"] == "exact" and int(r["horizon"]) == 64]
        return hits[0] if hits else None

    blocks = {
        v: [r for r in rows if (r.get("contact_options") or "", r.get("physics_dt") or "") == v] for v in variants
    }
    base = exact64(blocks.get(("", ""), []))
    for options, dt in variants:
        label = " ".join(p for p in (options.replace(";", " "), f"physics_dt={dt}" if dt else "") if p) or "as built"
        value = exact64(blocks[(options, dt)])
        ratio = f"{value / base:.3g}" if value is not None and base else "—"
        lines.append("| " + " | ".join([f"`{label}`"] + _gradient_cells(blocks[(options, dt)], []) + [ratio]) + " |")
    return "\n".join(lines)


def starts_table(sweep: str, model: str, level: str) -> str:
    """One row per source of start states of ``model`` as built at stiffness ``level`` in
    ``<sweep>/gradient_variance.csv``: the scripted controller's episodes (G1: the reference
    frames) first, then each policy's (``--starts-policy``); the columns of ``gradient_table``."""
    from baselines import gradient_variance_csv as gv_csv
    from baselines import gradient_variance_starts as gv_starts

    rows = [
        r
        for r in gv_csv.read_rows(RESULTS / sweep)
        if r["contact_model"] == model and float(r["level"]) == float(level) and not r.get("contact_options")
    ]
    rows = [r for r in rows if r.get("physics_dt") == rows[0].get("physics_dt")] if rows else rows
    sources: List[str] = []
    for r in rows:
        tag = gv_starts.starts_tag(r.get("starts_source"))
        if tag not in sources:
            sources.append(tag)
    sources.sort(key=bool)  # the scripted starts first
    lines = _gradient_head("starts from", [])
    for tag in sources:
        block = [r for r in rows if gv_starts.starts_tag(r.get("starts_source")) == tag]
        reference = (block[0].get("starts_source") or "").startswith("reference frames")
        label = f"`{tag}`" if tag else ("reference frames" if reference else "scripted controller")
        lines.append("| " + " | ".join([label] + _gradient_cells(block, [])) + " |")
    return "\n".join(lines)
