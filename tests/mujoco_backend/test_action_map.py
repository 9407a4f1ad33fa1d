"""bcg_envs/mujoco_backend/action_map.py: the Python-float action map that the fused step
uses (``ActionMap.terms``) against its NumPy form, bit for bit."""

import gymnasium as gym
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)
from tests.mujoco_backend.conftest import TASKS


@pytest.mark.parametrize("name", TASKS[:2])
def test_action_map_terms_match_numpy(name):
    env = gym.make(f"bcg_envs/{name}", backend="mujoco")
    amap = env.unwrapped.simulation.task.action_map
    assert amap.terms is not None
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (2000, amap.M.shape[1])).astype(np.float32)
    actions[:4] = np.array([-1.0, 1.0, 0.0, -0.0], np.float32)[:, None]  # the edges and both zeros too
    for a in actions:
        values = a.tolist()
        fast = np.array([c + values[k] * w for c, k, w in amap.terms])
        assert fast.tobytes() == amap(a).tobytes()
    env.close()
