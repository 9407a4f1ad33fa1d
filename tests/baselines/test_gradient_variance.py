"""baselines/gradient_variance.py: statistics, resumable CSV, a quick real sweep."""

import csv
import dataclasses

import numpy as np
import pytest

from baselines import gradient_variance as gv
from baselines.gradient_variance_contact import ContactModel
from baselines.gradient_variance_csv import COLUMNS, CSV_NAME, done_blocks, read_rows
from baselines.gradient_variance_starts import starts_tag
from tests.baselines.gradient_variance_stubs import StubRunner, moreau, run_stub_sweep, shipped_policy, stub_starts


def test_sweep_appends_blocks_and_skips_them_when_restarted(tmp_path):
    model = ContactModel("mujoco", (0.02, 0.008), "tau", True, 0.001)
    starts, horizons = stub_starts(), (1, 4)
    StubRunner.calls = []
    rows = gv.sweep(
        "BoxPush-v0",
        [model],
        ["bcg", "exact"],
        starts,
        horizons,
        tmp_path,
        reference_samples=3,
        resamples=50,
        runner=StubRunner,
    )
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
    assert (
        gv.sweep(
            "BoxPush-v0",
            [model],
            ["exact", "bcg"],
            starts,
            horizons,
            tmp_path,
            reference_samples=3,
            resamples=50,
            runner=StubRunner,
        )
        == []
    )
    assert StubRunner.calls == []
    more = gv.sweep(
        "BoxPush-v0",
        [model],
        ["exact", "bcg", "bundle"],
        starts,
        horizons,
        tmp_path,
        reference_samples=3,
        resamples=50,
        runner=StubRunner,
    )
    assert StubRunner.calls == [("runner", "mujoco"), ("bundle", 0.02), ("bundle", 0.008)]
    assert all(r["variance_ratio"] > 1e16 for r in more)
    assert len(read_rows(tmp_path)) == len(first) + len(more)

    gv.write_figures(tmp_path)  # the exploded bundle rows are clipped and marked
    for name in ("gradient_variance_ratio.png", "gradient_variance_raw.png"):
        assert (tmp_path / name).stat().st_size > 1000


@pytest.mark.integration
@pytest.mark.parametrize("contact_model", ["penalty", pytest.param("both", marks=pytest.mark.long)])
def test_quick_sweep_on_box_push(tmp_path, contact_model):
    """``--quick`` on BoxPush-v0 (4 scripted starts just before the pusher strikes the box,
    horizons 1 and 4, exact and bcg): finite statistics, exact never bundles, bcg bundles
    some steps (the strike exceeds its 10 N trigger). The penalty model by default (the
    MuJoCo model's gradients are checked by the gradient tests); both in the integration tier."""
    models = ("mujoco", "penalty") if contact_model == "both" else (contact_model,)
    gv.main(["--quick", "--env", "BoxPush-v0", "--contact-model", contact_model, "--out", str(tmp_path)])
    rows = read_rows(tmp_path)
    assert {(r["contact_model"], r["estimator"], int(r["horizon"])) for r in rows} == {
        (m, e, h) for m in models for e in ("exact", "bcg") for h in (1, 4)
    }
    for r in rows:
        for key in (
            "variance",
            "variance_lo",
            "variance_hi",
            "mean_grad_norm",
            "cosine_to_reference",
            "variance_ratio",
            "ms_per_rollout_gradient",
            "sims_per_step",
        ):
            assert np.isfinite(float(r[key])), (key, r)
        assert int(r["nonfinite"]) == 0 and int(r["starts"]) == 4
        assert int(r["grad_dim"]) == 2 * int(r["horizon"])
    exact = [r for r in rows if r["estimator"] == "exact"]
    bcg = [r for r in rows if r["estimator"] == "bcg"]
    assert all(float(r["bundled_fraction"]) == 0.0 and float(r["variance_ratio"]) == 1.0 for r in exact)
    assert any(float(r["bundled_fraction"]) > 0.0 for r in bcg)
    assert all(float(r["bundled_fraction"]) < 1.0 for r in bcg)
    for name in ("gradient_variance_ratio.png", "gradient_variance_raw.png"):
        assert (tmp_path / name).stat().st_size > 1000
    # A restart finds every block done.
    assert gv.main(["--quick", "--env", "BoxPush-v0", "--contact-model", contact_model, "--out", str(tmp_path)]) == []


def test_tick_labels_leave_out_crowded_levels():
    """kappa 200 and 300 sit 1.5x apart on the log axis: 300's label is left blank."""
    ticks = [50.0, 100.0, 200.0, 300.0, 500.0, 3000.0]
    assert gv.tick_labels(ticks) == ["50", "100", "200", "", "500", "3000"]


def test_raw_plot_never_clips_exact():
    """The raw plot's ceiling follows exact's largest finite upper bound (PlanarHand's exact
    reaches 1e23), so only estimators far above exact, or non-finite, become triangles."""
    rows = [
        {"estimator": "exact", "variance_hi": "3e23"},
        {"estimator": "exact", "variance_hi": "nan"},
        {"estimator": "zeroth", "variance_hi": "1e70"},
    ]
    assert gv.raw_ceiling(rows) == pytest.approx(3e26)
    assert gv.raw_ceiling([{"estimator": "zeroth", "variance_hi": "1e70"}]) == 1e12


def test_the_command_line_reaches_the_sweep_and_the_env(tmp_path, monkeypatch):
    """``main`` with the Moreau model and options: the models handed to the sweep, and the
    env they build (``make_jax`` with the model's keyword arguments) has them."""
    import bcg_envs

    seen = {}
    monkeypatch.setattr(gv, "find_starts", lambda *a, **k: stub_starts())
    monkeypatch.setattr(gv, "sweep", lambda env, models, *a, **k: seen.setdefault("models", models) and [])
    argv = ["--contact-model", "moreau", "--levels", "300", "--out", str(tmp_path), "--horizons", "1", "4"]
    assert gv.main([*argv, "--contact-options", "midpoint=False", "friction=regularized"]) == []
    (model,) = seen["models"]
    assert (model.name, model.levels, model.variant) == ("moreau", (300.0,), "friction=regularized;midpoint=False")
    params = bcg_envs.make_jax("BoxPush-v0", **model.env_kwargs(300.0)).physics.moreau
    assert (params.kappa, params.midpoint, params.friction) == (300.0, False, "regularized")
    seen.clear()
    gv.main(["--contact-model", "both", "--out", str(tmp_path)])  # the old command line
    assert [(m.name, m.options) for m in seen["models"]] == [("mujoco", ()), ("penalty", ())]
    with pytest.raises(SystemExit):
        gv.main(["--contact-model", "moreau", "--contact-options", "midpoint", "--out", str(tmp_path)])


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
    gv.write_figures(tmp_path)  # one row of panels per variant
    assert (tmp_path / "gradient_variance_raw.png").stat().st_size > 1000


@pytest.mark.integration
@pytest.mark.long
def test_moreau_sweep_on_box_push_with_options(tmp_path):
    """The Moreau model end to end: one level, 4 scripted starts, horizons 1 and 4, exact
    and bcg, midpoint off: finite statistics, the variant recorded, a restart skips it.
    Long: the two programs compile in 1.5 and 3 minutes on a loaded 16-core CPU."""
    argv = ["--quick", "--contact-model", "moreau", "--contact-options", "midpoint=False", "--out", str(tmp_path)]
    rows = gv.main(argv)
    assert len(rows) == 4 and {r["contact_options"] for r in rows} == {"midpoint=False"}
    for r in rows:
        assert r["contact_model"] == "moreau" and r["level"] == "300.0" and r["nonfinite"] == 0
        assert np.isfinite(r["variance"]) and np.isfinite(r["cosine_to_reference"])
    assert gv.main(argv) == []


def test_starts_policy_from_the_command_line(tmp_path, monkeypatch):
    """``--starts-policy PATH`` reaches ``find_starts`` as ``policy``; without it the
    scripted starts as before; a missing file or an env without a contact event is refused."""
    seen = {}
    monkeypatch.setattr(gv, "find_starts", lambda *a, **k: seen.update(policy=k.get("policy")) or stub_starts())
    monkeypatch.setattr(gv, "sweep", lambda *a, **k: [])
    argv = ["--contact-model", "moreau", "--levels", "300", "--horizons", "1", "--out", str(tmp_path)]
    path = str(shipped_policy())
    assert gv.main([*argv, "--starts-policy", path]) == [] and seen["policy"] == path
    seen.clear()
    assert gv.main(argv) == [] and seen["policy"] is None
    g1 = str(shipped_policy("G1Jump-v0"))
    assert gv.main([*argv, "--env", "G1Jump-v0", "--starts-policy", g1]) == [] and seen["policy"] == g1
    with pytest.raises(SystemExit):
        gv.main([*argv, "--starts-policy", str(tmp_path / "missing.npz")])


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
        return gv.sweep("BoxPush-v0", [model], ["exact", "bcg"], starts, (1, 4), tmp_path, **kw)

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
    assert gv._panel_title(gv._panel_of(rows[-1])) == "moreau policy-BoxPush-v0"
    gv.write_figures(tmp_path)  # one row of panels per start source
    assert (tmp_path / "gradient_variance_raw.png").stat().st_size > 1000


@pytest.mark.integration
def test_quick_sweep_on_box_push_from_policy_starts(tmp_path):
    """``--quick`` (penalty model) from the shipped BoxPush policy's starts, after the
    scripted sweep into the same folder: both measured, rows tell them apart, restarts skip."""
    argv = ["--quick", "--contact-model", "penalty", "--out", str(tmp_path)]
    policy = ["--starts-policy", str(shipped_policy())]
    assert len(gv.main(argv)) == 4
    rows = gv.main([*argv, *policy])
    assert len(rows) == 4 and all("BoxPush-v0.npz" in r["starts_source"] for r in rows)
    for r in rows:
        assert r["nonfinite"] == 0 and np.isfinite(r["variance"]) and np.isfinite(r["cosine_to_reference"])
    assert gv.main(argv) == [] and gv.main([*argv, *policy]) == []
