"""bcg_envs.sim2sim's aggregates (the G1 transfer runs themselves are integration tests in
tests/envs/g1/test_tracking.py)."""

import math

from bcg_envs.sim2sim import episode_summary


def episode(fell, err, fell_mjx=False, err_mjx=5.0):
    row = dict(fell=fell, completed=not fell, success=not fell, tracking_error_cm=err, joint_error_rad=err / 100)
    row.update(penetration_mm=1.0, steps=10)
    row.update({f"{k}_mjx": v for k, v in dict(fell=fell_mjx, completed=not fell_mjx, success=False).items()})
    row.update(tracking_error_cm_mjx=err_mjx, joint_error_rad_mjx=err_mjx / 100, penetration_mm_mjx=2.0, steps_mjx=10)
    return row


def test_errors_over_episodes_without_a_fall_leave_the_fallen_ones_out():
    """A fallen episode's error covers only its steps before the fall (often small): the
    ``_no_fall`` means leave it out; NaN where every episode fell."""
    out = episode_summary([episode(True, 2.0), episode(False, 8.0), episode(False, 12.0)])
    assert out["episodes"] == 3 and out["falls"] == 1 and out["completed"] == 2
    assert math.isclose(out["tracking_error_cm"], 22.0 / 3) and out["tracking_error_cm_no_fall"] == 10.0
    assert math.isclose(out["joint_error_rad_no_fall"], 0.1) and math.isclose(out["success_rate"], 2 / 3)
    assert out["falls_mjx"] == 0 and out["tracking_error_cm_no_fall_mjx"] == out["tracking_error_cm_mjx"] == 5.0
    every_one_fell = episode_summary([episode(True, 2.0, fell_mjx=True)])
    assert math.isnan(every_one_fell["tracking_error_cm_no_fall"])
    assert math.isnan(every_one_fell["joint_error_rad_no_fall_mjx"])
