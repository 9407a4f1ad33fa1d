"""baselines/gradient_variance.py: the command line, quick real sweeps."""

import numpy as np
import pytest

from baselines import gradient_variance as gv
from baselines.gradient_variance_csv import read_rows
from tests.baselines.gradient_variance_stubs import shipped_policy, stub_starts


@pytest.mark.integration
@pytest.mark.parametrize("contact_model", ["penalty", pytest.param("both", marks=pytest.mark.long)])
def test_quick_sweep_on_box_push(tmp_path, contact_model):
    """``--quick`` on BoxPush-v0 (4 scripted starts just before the pusher strikes the box,
    horizons 1 and 4, exact and bcg): finite statistics, exact never bundles, bcg bundles
    some steps (the strike exceeds its 10 N trigger); then, under the penalty model, the same
    from the shipped policy's starts. The penalty model in the integration tier (the MuJoCo
    model's gradients are checked by the gradient tests), both in the long tier."""
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
    argv = ["--quick", "--env", "BoxPush-v0", "--contact-model", contact_model, "--out", str(tmp_path)]
    assert gv.main(argv) == []
    if contact_model == "penalty":
        # The shipped BoxPush policy's starts, into the same folder: both measured, the rows
        # tell them apart, a restart skips both.
        policy = ["--starts-policy", str(shipped_policy())]
        rows = gv.main([*argv, *policy])
        assert len(rows) == 4 and all("BoxPush-v0.npz" in r["starts_source"] for r in rows)
        for r in rows:
            assert r["nonfinite"] == 0 and np.isfinite(r["variance"]) and np.isfinite(r["cosine_to_reference"])
        assert gv.main(argv) == [] and gv.main([*argv, *policy]) == []


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
