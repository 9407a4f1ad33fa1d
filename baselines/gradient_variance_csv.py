"""The gradient-variance sweep's CSV: its columns, reading, appending, and which blocks it holds."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Dict, Iterable, List, Sequence

from baselines import append_csv
from baselines.gradient_variance_contact import dt_key
from baselines.gradient_variance_starts import starts_tag

CSV_NAME = "gradient_variance.csv"
COLUMNS = (
    "env",
    "contact_model",
    "contact_options",
    "level",
    "physics_dt",
    "estimator",
    "horizon",
    "starts",
    "nonfinite",
    "grad_dim",
    "mean_grad_norm",
    "variance",
    "variance_lo",
    "variance_hi",
    "variance_ratio",
    "ratio_lo",
    "ratio_hi",
    "cosine_to_reference",
    "rel_error_to_reference",
    "bundled_fraction",
    "num_samples",
    "sims_per_step",
    "ms_per_rollout_gradient",
    "compile_s",
    "reference_samples",
    "starts_source",
)
#: The columns before ``contact_options`` was added: such CSVs are read with it empty (the
#: models' defaults) and rewritten with it on the next append.
LEGACY_COLUMNS = tuple(c for c in COLUMNS if c != "contact_options")


def read_rows(out_dir: Path) -> List[dict]:
    """Rows of the sweep's CSV (empty if absent); a CSV from before the
    ``contact_options`` column reads with it empty; ValueError on another format's header."""
    path = out_dir / CSV_NAME
    if not path.exists():
        return []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header = tuple(reader.fieldnames or ())
        if header not in (COLUMNS, LEGACY_COLUMNS):
            raise ValueError(
                f"{path} has columns {reader.fieldnames}, not this sweep's; move it aside or pick another --out"
            )
        rows = list(reader)
    if header == LEGACY_COLUMNS:
        rows = [{c: r.get(c, "") for c in COLUMNS} for r in rows]
    return rows


def append_rows(rows: List[dict], out_dir: Path) -> None:
    """Append ``rows`` to the CSV; a CSV from before the ``contact_options`` column is
    first rewritten with it (empty: the defaults), through a temporary file."""
    path = out_dir / CSV_NAME
    if path.exists() and path.stat().st_size:
        with path.open(newline="") as f:
            header = tuple(next(csv.reader(f), []))
        if header == LEGACY_COLUMNS:
            old = read_rows(out_dir)
            tmp = path.with_name(path.name + ".tmp")
            tmp.unlink(missing_ok=True)
            append_csv(tmp, COLUMNS, old)
            tmp.replace(path)
            print(f"{path}: added the contact_options column to its {len(old)} rows", flush=True)
    append_csv(path, COLUMNS, rows)


def done_blocks(rows: Iterable[dict], starts: int, horizons: Sequence[int], tag: str = "") -> set:
    """(contact model, options, physics_dt, level, estimator) blocks of ``rows`` (as
    ``ContactModel.block_key``) measured with ``starts`` starts of the source ``tag`` (as
    ``starts_tag``: "" the scripted ones, ``policy-<stem>`` a policy's) at every horizon of
    ``horizons``."""
    seen: Dict[tuple, set] = {}
    for r in rows:
        if int(r["starts"]) == starts and starts_tag(r.get("starts_source", "")) == tag:
            key = (r["contact_model"], r.get("contact_options") or "", dt_key(r["physics_dt"]), r["level"])
            seen.setdefault((*key, r["estimator"]), set()).add(int(r["horizon"]))
    return {key for key, hs in seen.items() if set(horizons) <= hs}
