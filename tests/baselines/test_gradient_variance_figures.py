"""baselines/gradient_variance_figures.py: tick labels and the raw plot's ceiling."""

import pytest

from baselines.gradient_variance_figures import raw_ceiling, tick_labels


def test_tick_labels_leave_out_crowded_levels():
    """kappa 200 and 300 sit 1.5x apart on the log axis: 300's label is left blank."""
    ticks = [50.0, 100.0, 200.0, 300.0, 500.0, 3000.0]
    assert tick_labels(ticks) == ["50", "100", "200", "", "500", "3000"]


def test_raw_plot_never_clips_exact():
    """The raw plot's ceiling follows exact's largest finite upper bound (PlanarHand's exact
    reaches 1e23), so only estimators far above exact, or non-finite, become triangles."""
    rows = [
        {"estimator": "exact", "variance_hi": "3e23"},
        {"estimator": "exact", "variance_hi": "nan"},
        {"estimator": "zeroth", "variance_hi": "1e70"},
    ]
    assert raw_ceiling(rows) == pytest.approx(3e26)
    assert raw_ceiling([{"estimator": "zeroth", "variance_hi": "1e70"}]) == 1e12
