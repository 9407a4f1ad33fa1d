"""Counting saturated actuators: the bound test, G1 episodes in MuJoCo C, the table."""

import gymnasium as gym
import numpy as np

import bcg_envs  # noqa: F401
from baselines import actuator_saturation as sat


def test_a_force_at_its_bound_is_saturated_only_on_a_force_limited_actuator():
    forcerange = np.array([[-5.0, 5.0]] * 4)
    got = sat.saturated(np.array([5.0, -5.0, 4.9, 5.0]), forcerange, np.array([1, 1, 1, 0]))
    assert got.tolist() == [True, True, False, False]


def test_a_bang_bang_policy_saturates_where_the_reference_tracker_does_not():
    """G1Jump in MuJoCo C, one episode each: full residual actions of alternating sign
    drive the PD torques to their limits; zero residuals track the reference pose."""
    env = gym.make("bcg_envs/G1Jump-v0", backend="mujoco")
    nu = env.action_space.shape[0]
    flip = {"sign": 1.0}

    def bang_bang(obs):
        flip["sign"] = -flip["sign"]
        return np.full(nu, flip["sign"], np.float32)

    tracker = sat.count(env, lambda obs: np.zeros(nu, np.float32), episodes=1, seed=0)
    bang = sat.count(env, bang_bang, episodes=1, seed=0)
    env.close()
    assert bang["saturated_steps"] / bang["steps"] > 0.5
    assert tracker["saturated_steps"] / tracker["steps"] < 0.5 * bang["saturated_steps"] / bang["steps"]
    assert bang["saturated_actuator_steps"] >= bang["saturated_steps"]


def test_table_gives_each_seed_and_the_mean_per_simulator():
    rows = [
        dict(algo="shac_exact", seed=s, simulator=sim, steps=100, saturated_steps=n)
        for s, (mjx, c) in enumerate([(30, 20), (10, 0)])
        for sim, n in (("mjx", mjx), ("mujoco", c))
    ]
    text = sat.table(rows)
    assert "| shac_exact | MJX | 2 | 30.0, 10.0 | 20.0 |" in text
    assert "| shac_exact | MuJoCo C | 2 | 20.0, 0.0 | 10.0 |" in text
