"""baselines/gradient_variance_sweep.py: the resumable sweep over stub gradients: blocks, variants, start sources."""

import csv
import dataclasses

import numpy as np

from baselines.gradient_variance_contact import ContactModel
from baselines.gradient_variance_csv import COLUMNS, CSV_NAME, done_blocks, read_rows
from baselines.gradient_variance_figures import panel_of, panel_title, write_figures
from baselines.gradient_variance_starts import starts_tag
from baselines.gradient_variance_sweep import sweep
from tests.baselines.gradient_variance_stubs import StubRunner, moreau, run_stub_sweep, stub_starts


def test_sweep_appends_blocks_and_skips_them_when_restarted(tmp_path):
    model = ContactModel("mujoco", (0.02, 0.008), "tau", True, 0.001)
    starts, horizons = stub_starts(), (1, 4)
    StubRunner.calls = []

    def run(estimators):
        return sweep(
            "BoxPush-v0",
            [model],
            estimators,
            starts,
            horizons,
            tmp_path,
            reference_samples=3,
            resamples=50,
            runner=StubRunner,
        )

    rows = run(["bcg", "exact"])
    assert len(rows) == 2 * 2 * 2
    assert StubRunner.calls == [
        ("runner", "mujoco"),
        ("exact", 0.02),
        ("reference", 0.02),
        ("bcg", 0.02),
        ("exact", 0.008),
        ("reference", 0.008),
        ("bcg", 0.008),
    ]
    with (tmp_path / CSV_NAME).open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == COLUMNS
        first = list(reader)
    by = {(r["level"], r["estimator"], r["horizon"]): r for r in first}
    assert float(by["0.02", "exact", "4"]["variance_ratio"]) == 1.0
    assert np.isclose(float(by["0.02", "bcg", "4"]["variance_ratio"]), 0.25)
    assert float(by["0.02", "bcg", "1"]["bundled_fraction"]) == 1.0
    assert float(by["0.02", "exact", "4"]["sims_per_step"]) == 3

    # Restarted: nothing is measured again; a new estimator reuses the stored exact
    # gradients for its ratio and the stored reference.
    StubRunner.calls = []
    assert run(["exact", "bcg"]) == []
    assert StubRunner.calls == []
    more = run(["exact", "bcg", "bundle"])
    assert StubRunner.calls == [("runner", "mujoco"), ("bundle", 0.02), ("bundle", 0.008)]
    assert all(r["variance_ratio"] > 1e16 for r in more)
    assert len(read_rows(tmp_path)) == len(first) + len(more)

    write_figures(tmp_path)  # the exploded bundle rows are clipped and marked
    for name in ("gradient_variance_ratio.png", "gradient_variance_raw.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_variants_share_the_csv_and_are_skipped_per_variant_when_restarted(tmp_path):
    """The default Moreau model, ``midpoint=False`` and another physics timestep: each is
    its own block (the CSV's ``contact_options`` and ``physics_dt`` columns), with its own
    data files; a restart skips exactly the variants done."""
    default, no_mid, dt = moreau(), moreau([("midpoint", False)]), moreau(physics_dt=0.002)
    assert len(run_stub_sweep([default], tmp_path)) == 4
    new = run_stub_sweep([no_mid, default], tmp_path)  # the default is done; the variant is not
    assert StubRunner.calls == [("runner", "moreau"), ("exact", 300.0), ("reference", 300.0), ("bcg", 300.0)]
    assert {r["contact_options"] for r in new} == {"midpoint=False"}
    assert len(run_stub_sweep([dt], tmp_path)) == 4
    rows = read_rows(tmp_path)
    assert len(rows) == 12
    assert {(r["contact_options"], r["physics_dt"]) for r in rows} == {("", ""), ("midpoint=False", ""), ("", "0.002")}
    names = sorted(p.name for p in (tmp_path / "gradient_variance_data").iterdir())
    assert names == sorted(
        f"{stem}_300.0_{what}_n8.npz"
        for stem in ("moreau", "moreau_midpoint=False", "moreau_dt0.002")
        for what in ("exact", "bcg", "reference2")
    )
    assert run_stub_sweep([default, no_mid, dt], tmp_path) == [] and StubRunner.calls == []
    write_figures(tmp_path)  # one row of panels per variant
    assert (tmp_path / "gradient_variance_raw.png").stat().st_size > 1000


def test_policy_rows_name_the_policy_and_are_skipped_apart_from_scripted_ones(tmp_path):
    """Scripted and policy starts into one ``--out``: neither run skips the other's blocks,
    the rows' ``starts_source`` says which starts (the policy file), the data files differ,
    a restart of either skips only its own blocks, and old rows count as scripted."""
    model = moreau()
    scripted = dataclasses.replace(stub_starts(), source="scripted episodes (seeds 0..), 2 steps before ...")
    policy_source = "policy BoxPush-v0.npz episodes (deterministic; seeds 0..), 2 steps before the first contact > 1 N"
    learned = dataclasses.replace(stub_starts(), source=policy_source)

    def run(starts):
        StubRunner.calls = []
        kw = dict(reference_samples=2, resamples=20, runner=StubRunner)
        return sweep("BoxPush-v0", [model], ["exact", "bcg"], starts, (1, 4), tmp_path, **kw)

    assert len(run(scripted)) == 4
    new = run(learned)
    assert len(new) == 4 and {r["starts_source"] for r in new} == {policy_source}
    assert StubRunner.calls == [("runner", "moreau"), ("exact", 300.0), ("reference", 300.0), ("bcg", 300.0)]
    assert run(scripted) == [] and run(learned) == [] and StubRunner.calls == []
    rows = read_rows(tmp_path)
    assert [starts_tag(r["starts_source"]) for r in rows] == [""] * 4 + ["policy-BoxPush-v0"] * 4
    names = sorted(p.name for p in (tmp_path / "gradient_variance_data").iterdir())
    assert names == sorted(
        f"moreau_300.0_{what}_n8{suffix}.npz"
        for suffix in ("", "_policy-BoxPush-v0")
        for what in ("exact", "bcg", "reference2")
    )
    both = {("moreau", "", "", "300.0", e) for e in ("exact", "bcg")}
    assert done_blocks(rows[:4], 8, (1, 4)) == done_blocks(rows[4:], 8, (1, 4), "policy-BoxPush-v0") == both
    assert done_blocks(rows[4:], 8, (1, 4)) == done_blocks(rows[:4], 8, (1, 4), "policy-BoxPush-v0") == set()
    assert done_blocks(rows, 8, (1, 4), "policy-other") == set()
    assert starts_tag("") == "" and starts_tag("reference frames 2..5 before touchdown") == ""
    assert panel_title(panel_of(rows[-1])) == "moreau policy-BoxPush-v0"
    write_figures(tmp_path)  # one row of panels per start source
    assert (tmp_path / "gradient_variance_raw.png").stat().st_size > 1000
