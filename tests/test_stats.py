"""Wilson score intervals of success rates."""

import pytest

from bcg_envs.stats import format_success, success_summary, wilson_interval


def test_wilson_interval_known_values_and_edges():
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert wilson_interval(0, 20)[0] == 0.0 and 0.15 < wilson_interval(0, 20)[1] < 0.17
    assert wilson_interval(20, 20)[1] == 1.0 and 0.83 < wilson_interval(20, 20)[0] < 0.85


def test_success_summary_and_format():
    summary = success_summary([True, False, True, True])
    assert summary["success_rate"] == 0.75
    assert format_success(summary).startswith("75.0 % [")


@pytest.mark.parametrize("k, n, match", [(1, 0, "trials"), (-1, 5, "successes"), (6, 5, "successes")])
def test_bad_counts_are_rejected_by_name(k, n, match):
    with pytest.raises(ValueError, match=match):
        wilson_interval(k, n)
