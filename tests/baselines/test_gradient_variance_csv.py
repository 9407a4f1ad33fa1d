"""baselines/gradient_variance_csv.py: the sweep's CSV, another format refused, the legacy format upgraded."""

import csv
import dataclasses

import pytest

from baselines.gradient_variance_contact import CONTACT_MODELS
from baselines.gradient_variance_csv import COLUMNS, CSV_NAME, LEGACY_COLUMNS, read_rows
from tests.baselines.gradient_variance_stubs import StubRunner, run_stub_sweep


def test_a_csv_of_another_format_is_refused_not_overwritten(tmp_path):
    (tmp_path / CSV_NAME).write_text("env,stiffness,estimator\nBoxPush-v0,stiff,exact\n")
    with pytest.raises(ValueError, match="columns"):
        read_rows(tmp_path)


def test_a_csv_without_the_options_column_reads_as_the_defaults_and_gains_it(tmp_path):
    """A CSV written before ``contact_options`` existed: its rows read with the column
    empty, count as the default variant's (skipped on restart), and the next append
    rewrites the file with the column, keeping them."""
    penalty = dataclasses.replace(CONTACT_MODELS["penalty"], levels=(300.0,))
    run_stub_sweep([penalty], tmp_path)
    path = tmp_path / CSV_NAME
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    with path.open("w", newline="") as f:  # the old format
        writer = csv.DictWriter(f, LEGACY_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    legacy = read_rows(tmp_path)
    assert len(legacy) == 4 and all(r["contact_options"] == "" for r in legacy)
    assert run_stub_sweep([penalty], tmp_path) == [] and StubRunner.calls == []
    variant = dataclasses.replace(penalty, options=(("baumgarte", 0.1),))
    assert len(run_stub_sweep([variant], tmp_path)) == 4
    with path.open(newline="") as f:
        assert tuple(next(csv.reader(f))) == COLUMNS
    after = read_rows(tmp_path)
    assert [r["contact_options"] for r in after] == [""] * 4 + ["baumgarte=0.1"] * 4
    assert [r["variance"] for r in after[:4]] == [r["variance"] for r in legacy]
