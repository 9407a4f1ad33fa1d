"""baselines/run_csv.py: runs read back whole, only complete ones, or cut at the budget; rows added to an older CSV."""

import csv
import math

import pytest

from baselines import run_csv, summary


def _write(path, rows):
    run_csv.write_csv(path, [dict(env_steps=s, wall_clock=w, eval_return=r) for s, w, r in rows])


def test_summary_reads_only_runs_that_reached_their_budget(tmp_path, capsys):
    """A run in progress (seed 1 at half the budget) stays out of the summary; an algorithm
    whose planned budget is rounded down (2,000 of 2,048) counts as complete at its plan."""
    _write(tmp_path / "sb3_ppo_seed0.csv", [(0, 0, -10), (2048, 5, 10)])
    _write(tmp_path / "sb3_ppo_seed1.csv", [(0, 0, -10), (1024, 5, -3)])
    _write(tmp_path / "brax_apg_seed0.csv", [(0, 0, -10), (2000, 5, 4)])
    _write(tmp_path / "shac_exact_seed0.csv", [(0, 0, -10), (2048, 5, 12)])
    runs = run_csv.read_runs(tmp_path, {"sb3_ppo": 2048, "brax_apg": 2000})
    assert sorted(runs) == ["brax_apg", "sb3_ppo"] and len(runs["sb3_ppo"]) == 1
    printed = capsys.readouterr().out
    assert "sb3_ppo_seed1.csv: left out of the summary (reaches 1,024 env steps of 2,048)" in printed
    assert "shac_exact_seed0.csv: left out of the summary (reaches 2,048 env steps of no known budget)" in printed
    assert "| sb3_ppo | 1 | 10.00 ± 0.00 |" in summary.summary_table(runs)
    assert len(run_csv.read_runs(tmp_path)["sb3_ppo"]) == 2  # without budgets: every run


def test_runs_longer_than_the_budget_are_scored_at_the_budget(tmp_path):
    """PPO run on to 4,096 env steps beside SHAC at 2,048: the table at 2,048 reads PPO's
    row at 2,048 (return 3, not its later 10); the plot keeps the whole run; a table at
    4,096 reads the later row."""
    _write(tmp_path / "sb3_ppo_seed0.csv", [(0, 0, -10), (2048, 5, 3), (4096, 9, 10)])
    _write(tmp_path / "shac_exact_seed0.csv", [(0, 0, -10), (2048, 5, 12)])
    budgets = {"sb3_ppo": 2048, "shac_exact": 2048}
    runs = run_csv.read_runs(tmp_path, budgets)
    assert len(runs["sb3_ppo"][0]) == 3  # whole runs for the plot
    cut = run_csv.at_budget(runs, budgets)
    assert [row["env_steps"] for row in cut["sb3_ppo"][0]] == [0, 2048]
    table = summary.summary_table(cut)
    assert "| sb3_ppo | 1 | 3.00 ± 0.00 |" in table and "| shac_exact | 1 | 12.00 ± 0.00 |" in table
    summary.plot_curves(runs, tmp_path / "curves.png", budget=2048)
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert "| sb3_ppo | 1 | 10.00 ± 0.00 |" in summary.summary_table(
        run_csv.at_budget({"sb3_ppo": runs["sb3_ppo"]}, {"sb3_ppo": 4096})
    )
    # A run without an evaluation at the budget (here 3,000: its last before it is 2,048)
    # is refused, not scored at an earlier point of its curve.
    with pytest.raises(ValueError, match="sb3_ppo: no evaluation at the budget of 3,000 env steps .*2,048"):
        run_csv.at_budget({"sb3_ppo": runs["sb3_ppo"]}, {"sb3_ppo": 3000})


def test_rows_appended_to_an_older_csv_keep_its_columns(tmp_path):
    """A run resumed by newer code appends in the columns its CSV was started with, and
    the columns an older CSV lacks read back as NaN."""
    path = tmp_path / "shac_bcg_seed0.csv"
    old_fields = run_csv.CSV_FIELDS[:7]
    path.write_text(",".join(old_fields) + "\n0,0.0,1.0,2.0,0.0,200.0,64\n")
    run_csv.append_row(
        path,
        dict(
            env_steps=100,
            sim_steps=300.0,
            wall_clock=2.0,
            eval_return=3.0,
            eval_success=0.5,
            eval_length=200.0,
            eval_episodes=64,
            skipped_updates=1,
            bundled_fraction=0.02,
        ),
    )
    with path.open() as f:
        parsed = list(csv.DictReader(f))
    assert tuple(parsed[0]) == old_fields and len(parsed) == 2
    rows = run_csv.read_rows(path)
    assert rows[1]["env_steps"] == 100 and math.isnan(rows[1]["bundled_fraction"])
