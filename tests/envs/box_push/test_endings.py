"""``bcg_envs.envs.box_push.endings``: the box's distance and yaw error read from observations."""

import gymnasium as gym
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)
from bcg_envs.envs.box_push import endings, scripted
from bcg_envs.envs.box_push.push import default_config


def test_distance_and_yaw_agree_with_the_envs_own_success_at_every_step():
    """The env decides success from its state (qpos, goal); the observation decoding must
    reproduce that decision step by step, through the scripted push's approach (no success)
    and its hold at the goal (success)."""
    cfg = default_config()
    env = gym.make("bcg_envs/BoxPush-v0", backend="mujoco")
    obs, _ = env.reset(seed=3)
    flags = []
    for _ in range(cfg["episode_length"]):
        obs, _, terminated, truncated, info = env.step(scripted.scripted_push(obs))
        distance, yaw = endings.distance_and_yaw(obs)
        decoded = distance < cfg["success_distance"] and yaw < cfg["success_yaw"]
        assert decoded == bool(info["is_success"]), (distance, yaw, info["is_success"])
        flags.append(decoded)
        if terminated or truncated:
            break
    env.close()
    assert not flags[0] and flags[-1]  # both outcomes were checked


def test_yaw_error_is_wrapped_into_zero_to_pi():
    obs = np.zeros(17)
    obs[15:17] = np.cos(2 * np.pi - 0.1), np.sin(2 * np.pi - 0.1)
    obs[11:13] = 0.03, 0.04
    distance, yaw = endings.distance_and_yaw(obs)
    assert distance == pytest.approx(0.05) and yaw == pytest.approx(0.1)


def test_episode_endings_of_a_zero_action_leave_the_box_where_it_started():
    e = endings.episode_endings(lambda obs: np.zeros(2), episodes=2)
    assert {k: v.shape for k, v in e.items()} == {k: (2,) for k in e}
    np.testing.assert_allclose(e["final_distance"], e["start_distance"], atol=1e-3)
    np.testing.assert_allclose(e["final_yaw"], e["start_yaw"], atol=1e-3)
    assert np.all(e["length"] == 200) and not np.any(e["success"])


def test_bad_episode_count_is_refused():
    with pytest.raises(ValueError, match="episodes"):
        endings.episode_endings(lambda obs: np.zeros(2), episodes=0)
