"""Where BoxPush-v0 episodes end: the box's distance and yaw error to the goal.

A return does not say how close a policy gets to success (the box within 2 cm *and* 0.2 rad
of the goal pose at the last step) nor which bar it misses; these read both from the
observations, so they work for any policy on either Gymnasium backend.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import numpy as np

#: Observation slices (see ``bcg_envs.envs.box_push.push``): goal minus box xy (m), cos/sin of the yaw error.
GOAL_OFFSET, YAW_ERROR = slice(11, 13), slice(15, 17)


def distance_and_yaw(obs: np.ndarray) -> Tuple[float, float]:
    """Box-goal distance (m) and |yaw error| (rad, in [0, pi]) of a BoxPush-v0 observation."""
    cos, sin = obs[YAW_ERROR]
    return float(np.linalg.norm(obs[GOAL_OFFSET])), float(abs(np.arctan2(sin, cos)))


def episode_endings(
    policy: Callable[[np.ndarray], np.ndarray], episodes: int = 16, seed: int = 0, backend: str = "mujoco"
) -> Dict[str, np.ndarray]:
    """Full BoxPush-v0 episodes of ``policy`` (observation -> action) from reset seeds
    ``seed, seed + 1, ...``. Per episode: ``return``, ``length``, ``success`` (the last
    step's ``info["is_success"]``), ``start_distance``/``final_distance`` (m) and
    ``start_yaw``/``final_yaw`` (|yaw error|, rad)."""
    import gymnasium as gym

    import bcg_envs  # noqa: F401  (registers the ids)
    from bcg_envs.registry import NAMESPACE

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    env = gym.make(f"{NAMESPACE}/BoxPush-v0", backend=backend)
    keys = ("return", "length", "success", "start_distance", "start_yaw", "final_distance", "final_yaw")
    out = {k: [] for k in keys}
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            start = distance_and_yaw(obs)
            total, steps, done, info = 0.0, 0, False, {}
            while not done:
                obs, reward, terminated, truncated, info = env.step(policy(obs))
                total += float(reward)
                steps += 1
                done = terminated or truncated
            for k, v in zip(keys, (total, steps, bool(info["is_success"]), *start, *distance_and_yaw(obs))):
                out[k].append(v)
    finally:
        env.close()
    return {k: np.asarray(v) for k, v in out.items()}
