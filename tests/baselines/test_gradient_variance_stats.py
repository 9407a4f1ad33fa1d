"""baselines/gradient_variance_stats.py: total variance, bootstrap intervals, statistics against a reference."""

import math

import numpy as np

from baselines.gradient_variance_stats import (
    bootstrap_ratio,
    bootstrap_variance,
    cosine,
    horizon_stats,
    variance_across_seeds,
)


def test_variance_and_cosine_of_huge_float32_gradients_are_finite():
    """An under-determined zeroth-order rollout gradient reaches ~1e20 in float32: its
    square overflows float32, not float64."""
    g = np.array([[1e20, -3e20], [-1e20, 3e20]], np.float32)
    assert np.isclose(variance_across_seeds(g), 1e40 + 9e40, rtol=1e-6)
    assert cosine(g[0], g[0]) == 1.0 and cosine(g[0], g[1]) == -1.0
    lo, hi = bootstrap_variance(g, 50)
    assert np.isfinite(lo) and np.isfinite(hi)


def test_bootstrap_interval_of_the_variance_covers_the_truth_and_shrinks_with_more_starts():
    """Rows of N(0, s^2) in d dimensions have total variance s^2 d; the 95 % interval
    covers it and is about 4x narrower with 16x the rows."""
    s, d = 2.0, 5
    rng = np.random.default_rng(0)
    widths = []
    for n in (100, 1600):
        g = s * rng.standard_normal((n, d))
        lo, hi = bootstrap_variance(g, resamples=1000, seed=0)
        assert lo < s**2 * d < hi, (n, lo, hi)
        assert lo < variance_across_seeds(g) < hi
        widths.append(hi - lo)
    assert 2.5 < widths[0] / widths[1] < 6.5, widths


def test_bootstrap_interval_of_a_variance_ratio_covers_the_truth():
    rng = np.random.default_rng(1)
    g, h = 3.0 * rng.standard_normal((800, 4)), rng.standard_normal((800, 4))
    lo, hi = bootstrap_ratio(g, h, resamples=1000, seed=0)
    assert lo < 9.0 < hi and hi - lo < 3.0, (lo, hi)
    assert bootstrap_ratio(g, g, resamples=100) == (1.0, 1.0)


def test_statistics_count_non_finite_gradients_and_leave_them_out():
    rng = np.random.default_rng(2)
    g = rng.standard_normal((10, 6))
    ref = g.copy()
    g_bad = g.copy()
    g_bad[3, 1], g_bad[7, 0] = np.nan, np.inf
    stats = horizon_stats(g_bad, ref, g, resamples=100, seed=0)
    ok = np.ones(10, bool)
    ok[[3, 7]] = False
    assert stats["nonfinite"] == 2 and stats["grad_dim"] == 6
    assert np.isclose(stats["variance"], variance_across_seeds(g[ok]))
    assert np.isclose(stats["variance_ratio"], 1.0)
    assert np.isclose(stats["cosine_to_reference"], 1.0) and np.isclose(stats["rel_error_to_reference"], 0.0)
    assert np.isclose(stats["mean_grad_norm"], np.mean(np.linalg.norm(g[ok], axis=1)))
    none = horizon_stats(np.full((4, 3), np.nan), np.ones((4, 3)), None, resamples=10, seed=0)
    assert none["nonfinite"] == 4 and math.isnan(none["variance"]) and math.isnan(none["variance_ratio"])


def test_bootstrap_interval_of_one_far_start_keeps_the_others_spread():
    """One start 1e16 away from 15 others with total variance ~40: over a third of the
    resamples leave it out, so the interval's lower end is the others' spread (~30-40).
    E[g^2] - E[g]^2 loses that spread to cancellation (it went negative on the G1 landing)."""
    for seed in range(3):
        g = np.random.default_rng(seed).normal(size=(16, 40))
        g[3] += 1e16
        lo, hi = bootstrap_variance(g, resamples=400, seed=seed)
        assert 15 < lo < 60
        assert 1e32 < hi <= 40 * 1e32 / 4  # at most d * (1e16)^2 * p (1 - p), p = 1/2
