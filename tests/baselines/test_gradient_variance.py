"""baselines/gradient_variance.py on a tiny sweep: bcg varies less than exact when stiff."""

import csv

import numpy as np

from baselines import gradient_variance


def test_simulation_counts_follow_the_estimators_cost_model():
    nx, nu, n = 10, 2, 10
    assert gradient_variance.simulations_per_step("exact", nx, nu, n, 0.0) == 13
    assert gradient_variance.simulations_per_step("bundle", nx, nu, n, 1.0) == 121
    # bcg costs exact off contact and the bundle on every bundled step.
    assert gradient_variance.simulations_per_step("bcg", nx, nu, n, 0.0) == 13
    assert gradient_variance.simulations_per_step("bcg", nx, nu, n, 1.0) == 121


def test_variance_and_cosine_of_huge_float32_gradients_are_finite():
    """An under-determined zeroth-order rollout gradient reaches ~1e20 in float32: its
    square overflows float32 (the session-4 to 6 tables printed ``inf``), not float64."""
    g = np.array([[1e20, -3e20], [-1e20, 3e20]], np.float32)
    assert np.isclose(gradient_variance.variance_across_seeds(g), 1e40 + 9e40, rtol=1e-6)
    assert gradient_variance.cosine(g[0], g[0]) == 1.0 and gradient_variance.cosine(g[0], g[1]) == -1.0


def test_sweep_shows_bcg_below_exact_at_the_stiffest_setting(tmp_path):
    """Across 8 seeds (1 mm start-state jitter, plus the bundle's own samples for bcg), the
    gradient of an 8-step return with respect to the start state varies less with bcg than
    with exact gradients when the rollout starts with a stiff pusher-box impact: the exact
    impact Jacobian swings with the contact timing inside the step, the bundle averages it."""
    rows = gradient_variance.sweep("BoxPush-v0", ["stiff"], ["exact", "bcg"], seeds=8, horizon=8, reference_samples=8)
    gradient_variance.write(rows, tmp_path)
    by = {r["estimator"]: r for r in rows}
    print({k: (r["variance"], r["bundled_fraction"]) for k, r in by.items()})
    assert np.isfinite(by["exact"]["variance"]) and np.isfinite(by["bcg"]["variance"])
    assert by["exact"]["bundled_fraction"] == 0.0 and 0.0 < by["bcg"]["bundled_fraction"] < 1.0
    assert by["bcg"]["variance"] < by["exact"]["variance"]
    with (tmp_path / "gradient_variance.csv").open() as f:
        assert [r["estimator"] for r in csv.DictReader(f)] == ["exact", "bcg"]
    assert (tmp_path / "gradient_variance.png").stat().st_size > 1000
