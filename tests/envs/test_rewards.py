"""What every task's reward promises: bounded, non-negative terms and a success flag."""

import gymnasium as gym
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)


@pytest.mark.parametrize("env_id", ["BoxPush-v0", "PlanarHand-v0"])
def test_step_rewards_are_bounded_and_success_is_reported_every_step(env_id):
    """100 random steps (MuJoCo C): every weighted term lies in [0, its weight], so no step
    pays less than 0 (ending early cannot escape a penalty), and ``is_success`` is a bool."""
    e = gym.make(f"bcg_envs/{env_id}", backend="mujoco")
    weights = e.unwrapped.jax_env.config["reward_weights"]
    e.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(100):
        _, reward, terminated, truncated, info = e.step(rng.uniform(-1, 1, e.action_space.shape).astype(np.float32))
        assert 0.0 <= reward <= sum(weights.values()) + 1e-5
        assert all(-1e-6 <= info[f"reward/{k}"] / w <= 1 + 1e-6 for k, w in weights.items())
        assert isinstance(info["is_success"], bool)
        if terminated or truncated:
            e.reset()
    e.close()
