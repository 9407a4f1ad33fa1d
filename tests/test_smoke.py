"""One smoke test per registered env and physics backend: make, reset, a few steps.

The task-level checks (Jacobians against finite differences, scoring, learning) live in
tests/envs/ and the integration tier; this file only shows that every id runs on both
backends from a plain ``gym.make``.
"""

import gymnasium as gym
import numpy as np
import pytest

import bcg_envs

IDS = bcg_envs.list_envs()


def make_kwargs(env_id: str) -> dict:
    if env_id.startswith("G1Track"):
        from bcg_envs.envs.g1 import motions

        return {"motion_file": str(motions.clip_path("squat"))}
    return {}


def cases():
    """Every id on both backends. The G1 ids share one robot and step program and differ in
    their clip only; compiling a G1 MJX step takes minutes, so G1Jump's stands for them in
    the default tier and the other G1 ids' MJX smoke tests run in the integration tier."""
    for env_id in (i.split("/")[-1] for i in IDS):
        for backend in ("mjx", "mujoco"):
            heavy = backend == "mjx" and env_id.startswith("G1") and env_id != "G1Jump-v0"
            yield pytest.param(env_id, backend, marks=[pytest.mark.integration] if heavy else [])


@pytest.mark.parametrize("env_id, backend", list(cases()))
def test_make_reset_and_step(env_id, backend):
    env = gym.make(f"bcg_envs/{env_id}", backend=backend, **make_kwargs(env_id))
    obs, info = env.reset(seed=0)
    assert obs in env.observation_space and np.isfinite(obs).all()
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(np.zeros(env.action_space.shape, np.float32))
        assert obs in env.observation_space and np.isfinite(obs).all()
        assert np.isfinite(reward)
        assert isinstance(info["is_success"], (bool, np.bool_))
    env.close()
