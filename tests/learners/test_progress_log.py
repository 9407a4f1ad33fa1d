"""``bcg_envs.learners.progress_log.ProgressLog``: the CSV and TensorBoard sink of ``train``."""

from __future__ import annotations

import csv
import math

from bcg_envs.learners.progress_log import ProgressLog


def _rows(path):
    with path.open() as f:
        return list(csv.DictReader(f))


def test_csv_columns_append_and_tensorboard(tmp_path):
    with ProgressLog(tmp_path, ["num_steps", "loss", "eval/return"]) as log:
        log(10, {"num_steps": 10, "loss": 0.5, "extra": 1.0})  # unknown keys are ignored
        log(20, {"num_steps": 20, "loss": math.nan, "eval/return": -3.0})
    assert _rows(tmp_path / "progress.csv") == [
        {"num_steps": "10", "loss": "0.5", "eval/return": ""},
        {"num_steps": "20", "loss": "nan", "eval/return": "-3.0"},
    ]
    assert list(tmp_path.glob("events.out.tfevents*"))
    # a resumed run appends under the existing header, whatever fields it passes
    with ProgressLog(tmp_path, ["num_steps", "other"], append=True) as log:
        log(30, {"num_steps": 30, "loss": 0.25})
    assert [r["loss"] for r in _rows(tmp_path / "progress.csv")] == ["0.5", "nan", "0.25"]
    # a new run overwrites
    with ProgressLog(tmp_path, ["num_steps"]) as log:
        log(1, {"num_steps": 1})
    assert _rows(tmp_path / "progress.csv") == [{"num_steps": "1"}]


def test_fields_from_first_row_as_progress_fn(tmp_path):
    log = ProgressLog(tmp_path / "new")  # a progress_fn(num_steps, metrics) on its own
    assert not (tmp_path / "new" / "progress.csv").exists()
    log(0, {"num_steps": 0, "eval/episode_reward": -1.5})
    log(8, {"num_steps": 8, "eval/episode_reward": -1.0})
    log.close()
    assert _rows(tmp_path / "new" / "progress.csv") == [
        {"num_steps": "0", "eval/episode_reward": "-1.5"},
        {"num_steps": "8", "eval/episode_reward": "-1.0"},
    ]
