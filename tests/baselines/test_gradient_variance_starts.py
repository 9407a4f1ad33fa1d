"""baselines/gradient_variance_starts.py: start states from scripted and policy episodes, cached apart."""

import numpy as np
import pytest

from baselines import gradient_variance_starts
from baselines.gradient_variance_starts import find_starts, policy_starts, starts_tag
from tests.baselines.gradient_variance_stubs import shipped_policy


def test_policy_starts_differ_from_scripted_ones_and_are_cached_apart(tmp_path, monkeypatch):
    """Two starts from the shipped BoxPush policy's episodes and two from the scripted
    controller's (seeds 0, 1, ..., 2 steps before the first contact > 1 N): other states and
    actions, other cache files (``_policy-<stem>``), a source naming the policy file; the
    cache returns the same starts; another env's policy is refused."""
    policy = shipped_policy()
    scripted = find_starts("BoxPush-v0", 2, 1, tmp_path)
    learned = find_starts("BoxPush-v0", 2, 1, tmp_path, policy=policy)
    names = sorted(p.name for p in tmp_path.glob("gradient_variance_starts_*.npz"))
    assert names == [
        "gradient_variance_starts_n2_T1_lead2_force1.npz",
        "gradient_variance_starts_n2_T1_lead2_force1_policy-BoxPush-v0.npz",
    ]
    assert scripted.source.startswith("scripted episodes") and starts_tag(scripted.source) == ""
    assert "BoxPush-v0.npz" in learned.source and starts_tag(learned.source) == "policy-BoxPush-v0"
    assert learned.qpos.shape == scripted.qpos.shape and learned.actions.shape == (2, 1, 2)
    assert not np.allclose(learned.qpos, scripted.qpos) and not np.allclose(learned.actions, scripted.actions)
    np.testing.assert_array_equal(learned.task_info["goal"], scripted.task_info["goal"])  # same seeds, same goals

    def no_episodes(*args, **kwargs):
        raise AssertionError("the cached starts were measured again")

    monkeypatch.setattr(gradient_variance_starts, "policy_starts", no_episodes)
    again = find_starts("BoxPush-v0", 2, 1, tmp_path, policy=policy)
    np.testing.assert_array_equal(again.qpos, learned.qpos)
    np.testing.assert_array_equal(again.actions, learned.actions)
    assert again.source == learned.source
    monkeypatch.undo()
    with pytest.raises(ValueError, match="G1Jump-v0"):
        policy_starts("BoxPush-v0", shipped_policy("G1Jump-v0"), 1, 1, 1.0, 2)
    with pytest.raises(ValueError, match="not of G1Jump-v0"):
        find_starts("G1Jump-v0", 1, 1, tmp_path, policy=policy)


def test_g1_policy_starts_sit_before_the_landing_of_the_reference(tmp_path):
    """G1Jump: starts 2 steps before the first touchdown after a flight in the shipped
    policy's episodes. A tracking policy lands near the clip's own touchdown, so each
    start's ``ref_start`` (the episode's first frame plus the start's step) lies within 10
    frames (0.2 s) of the clip's touchdown minus the lead, as the clip's contact labels give it;
    without the shift by the start's step it would be the episode's random first frame."""
    import bcg_envs

    starts = find_starts("G1Jump-v0", 3, 4, tmp_path, policy=shipped_policy("G1Jump-v0"))
    assert "touchdown after a flight" in starts.source and starts.actions.shape[:2] == (3, 4)
    ref = bcg_envs.make_jax("G1Jump-v0").reference
    airborne = ~np.any(ref.foot_contact > 0.5, axis=1)
    touchdown = int(np.flatnonzero(airborne[:-1] & ~airborne[1:])[0]) + 1
    frames = starts.task_info["ref_start"]
    assert np.all(np.abs(frames + 2 - touchdown) <= 10), (frames, touchdown)
