"""The CSV of one run, a row per evaluation: its columns, writing, appending and reading runs back, completeness."""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional

CSV_FIELDS = (
    "env_steps",
    "sim_steps",
    "wall_clock",
    "eval_return",
    "eval_success",
    "eval_length",
    "eval_episodes",
    "skipped_updates",
    "bundled_fraction",
    "cpu_time",
    "others_cpu_time",
    "cpus",
    "train_sim_return",
    "train_sim_success",
    "resumes",
)
#: The columns that count things: read back as ints, so a resumed run rewrites them as written.
COUNT_FIELDS = ("env_steps", "eval_episodes", "resumes")
#: A run counts as complete when its last row reaches this fraction of the budget (Brax
#: rounds its step counts to whole batches).
COMPLETE = 0.99
Row = Dict[str, float]


def write_csv(path: Path, rows: List[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_FIELDS))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, float("nan")) for k in writer.fieldnames})


def append_row(path: Path, row: Row) -> None:
    """One more row of a CSV that ``write_csv`` started (flushed: a killed run keeps it), in
    the columns of that CSV's header (an older CSV keeps its columns)."""
    with path.open() as f:
        fields = next(csv.reader(f))
    with path.open("a", newline="") as f:
        csv.DictWriter(f, fieldnames=fields).writerow({k: row.get(k, float("nan")) for k in fields})


def read_rows(path: Path) -> List[Row]:
    """The rows of one run's CSV, with the columns older CSVs lack: no success or length
    (from before success was scored), 16 evaluation episodes (before the shared protocol),
    no simulated steps (before that axis), no count of resumes (unknown, not zero)."""
    if not path.exists():
        return []

    def parse(key: str, text: str) -> float:
        value = float(text)
        return int(value) if key in COUNT_FIELDS and math.isfinite(value) else value

    with path.open() as f:
        return [
            {
                "eval_success": float("nan"),
                "eval_length": float("nan"),
                "eval_episodes": 16,
                "sim_steps": float("nan"),
                "skipped_updates": float("nan"),
                "bundled_fraction": float("nan"),
                "cpu_time": float("nan"),
                "others_cpu_time": float("nan"),
                "cpus": float("nan"),
                "train_sim_return": float("nan"),
                "train_sim_success": float("nan"),
                "resumes": float("nan"),
                **{k: parse(k, v) for k, v in row.items()},
            }
            for row in csv.DictReader(f)
        ]


def read_runs(out_dir: Path, budgets: Optional[Dict[str, int]] = None) -> Dict[str, List[List[Row]]]:
    """algo -> list (over seeds) of rows, from ``<algo>_seed<s>.csv`` files. With
    ``budgets`` (algo -> planned env steps), only runs that reached their algorithm's budget
    (``COMPLETE`` of it): a run still in progress, or stopped early, would pull a final
    score and its interval towards an earlier point of the curve."""
    runs: Dict[str, List[List[Row]]] = defaultdict(list)
    for path in sorted(out_dir.glob("*_seed*.csv")):
        algo = path.stem.rsplit("_seed", 1)[0]
        rows = read_rows(path)
        if not rows:
            continue
        budget = budgets.get(algo) if budgets is not None else None
        if budgets is not None and (budget is None or rows[-1]["env_steps"] < COMPLETE * budget):
            print(
                f"{path.name}: left out of the summary (reaches {rows[-1]['env_steps']:,.0f} env steps of "
                f"{'no known budget' if budget is None else f'{budget:,}'})"
            )
            continue
        runs[algo].append(rows)
    return dict(runs)


def at_budget(runs: Dict[str, List[List[Row]]], budgets: Dict[str, int]) -> Dict[str, List[List[Row]]]:
    """Each run's rows up to its algorithm's budget (1 % slack for rounding): a run longer
    than the budget is scored where the others stop, so a table compares equal env steps and
    a longer run (PPO to its plateau) can share a directory with shorter ones. Raises
    ``ValueError`` where a run has no evaluation at its budget (its last row within the
    budget is earlier): its final score would be an earlier point of its curve."""
    out: Dict[str, List[List[Row]]] = {}
    for algo, seeds in runs.items():
        budget = budgets[algo]
        out[algo] = [[row for row in rows if row["env_steps"] <= budget / COMPLETE] for rows in seeds]
        for rows in out[algo]:
            if not rows or rows[-1]["env_steps"] < COMPLETE * budget:
                last = f"{rows[-1]['env_steps']:,.0f}" if rows else "no row"
                raise ValueError(
                    f"{algo}: no evaluation at the budget of {budget:,} env steps (the last before it: {last})"
                )
    return out


def is_complete(path: Path, steps: int) -> bool:
    """Whether the run's CSV reaches the budget (``COMPLETE`` of ``steps``)."""
    rows = read_rows(path)
    return bool(rows) and rows[-1]["env_steps"] >= COMPLETE * steps
