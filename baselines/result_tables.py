"""Tables of the other committed results on the results page: contact events, friction
switches, tuning runs and final scores, each read from its CSV under ``RESULTS`` and
written by the table of the module that measured it."""

from __future__ import annotations

import csv
import json
from typing import List

from baselines import protocol, run_csv
from baselines.comparisons import RESULTS, ROOT, TUNING
from baselines.page_format import number


def contact_events_table(model: str) -> str:
    from baselines import contact_events

    with (RESULTS / "contact_events.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["contact_model"] == model]
    return contact_events.table([{**r, **{k: number(r[k]) for k in contact_events.MEASURED}} for r in rows])


def friction_tables() -> str:
    from baselines import friction_switches as fs

    def read(name: str) -> List[dict]:
        with (RESULTS / name).open(newline="") as f:
            return [
                {k: (v if k in ("env", "policy", "group", "steps") else number(v)) for k, v in r.items()}
                for r in csv.DictReader(f)
            ]

    return fs.tables(read("friction_switches.csv"), read("friction_switches_top.csv"))


def tuning_table(key: str) -> str:
    from baselines import tune

    _, grids_path, algos, seed = TUNING[key]
    grids = json.loads((ROOT / grids_path).read_text())
    plans = [
        (algo, setting, None)
        for algo in algos
        for setting in tune.settings(grids.get(algo, grids.get(protocol.config_section(algo))))
    ]
    # A grid file that declares its budget lists only the settings that reached it (a run in
    # progress is not a result).
    budget = grids.get("budgets", {}).get(key.split("/")[0], {}).get("steps", 0)
    rows_of = [
        run_csv.read_rows(RESULTS / key / algo / f"{tune.setting_name(setting)}_seed{seed}.csv")
        for algo, setting, _ in plans
    ]
    rows_of = [rows if rows and rows[-1]["env_steps"] >= budget else [] for rows in rows_of]
    done = [plan for plan, rows in zip(plans, rows_of) if rows]
    table = tune.tuning_table(RESULTS / key, done, seed)
    # Success at every evaluation, beside the final score the grid ranks by (in plan order).
    lines = table.splitlines()
    lines[0] += " success at each evaluation (%) |"
    lines[1] += "---|"
    for i, rows in enumerate(r for r in rows_of if r):
        lines[2 + i] += " " + " ".join(f"{100 * r['eval_success']:.0f}" for r in rows) + " |"
    missing = [f"{algo} {tune.setting_name(setting)}" for (algo, setting, _), rows in zip(plans, rows_of) if not rows]
    if missing:
        lines.append("")
        lines.append(f"Not run yet ({len(missing)} of {len(plans)} settings): " + "; ".join(missing) + ".")
    return "\n".join(lines)


def final_scores_table(key: str) -> str:
    from baselines import final_scores

    return final_scores.table(final_scores.read_scores(RESULTS / key / "final_scores.csv")).rstrip("\n")
