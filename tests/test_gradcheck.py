"""``bcg-envs gradcheck``: MJX's exact Jacobians against MuJoCo C finite differences along
a seeded random rollout."""

import pytest

from bcg_envs import gradcheck

pytestmark = pytest.mark.integration  # compiles MJX's exact Jacobians of two tasks


def test_boxpush_free_states_agree_and_the_rollout_repeats(capsys):
    first = gradcheck.run("BoxPush-v0", states=3, seed=0)
    assert all(c.within and c.error_A < 1e-6 and c.error_B < 1e-6 for c in first)
    assert gradcheck.run("BoxPush-v0", states=3, seed=0) == first  # seeded: the same states
    assert "3/3 states within 0.001" in capsys.readouterr().out


def test_planar_hand_agrees_away_from_contact_including_sticking_joints():
    """PlanarHand's finger joints have dry friction: out of contact the two agree only
    because the reference solver converges (at the task's own iterations, 5e-3 apart)."""
    checks = gradcheck.run("PlanarHand-v0", states=8, seed=0)
    free = [c for c in checks if not c.in_contact]
    assert len(free) >= 3
    assert all(c.error_A < 1e-5 and c.error_B < 1e-5 for c in free)
