"""Shared test double of the SHAC tests: ``PointMass``, a cheap pure-JAX env."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from bcg_envs.envs.base import State


class PointMass:
    """A 2-D point mass pushed toward a random goal: smooth, pure JAX, compiles in seconds."""

    episode_length = 40
    observation_size = 6
    action_size = 2

    def reset(self, rng):
        rng, k1, k2 = jax.random.split(rng, 3)
        data = {"pos": jax.random.uniform(k1, (2,), minval=-1.0, maxval=1.0), "vel": jnp.zeros(2)}
        info = {
            "rng": rng,
            "step": jnp.zeros((), jnp.int32),
            "truncated": jnp.zeros((), bool),
            "goal": jax.random.uniform(k2, (2,), minval=-1.0, maxval=1.0),
        }
        return State(data, self._obs(data, info), jnp.zeros(()), jnp.zeros(()), {}, info)

    def _obs(self, data, info):
        return jnp.concatenate([data["pos"], data["vel"], info["goal"] - data["pos"]])

    def step(self, state, action):
        action = jnp.clip(action, -1.0, 1.0)
        vel = state.data["vel"] + 0.2 * action
        data = {"pos": state.data["pos"] + 0.05 * vel, "vel": vel}
        info = dict(state.info)
        info.update(rng=jax.random.split(state.info["rng"])[0], step=state.info["step"] + 1)
        info["truncated"] = info["step"] >= self.episode_length
        reward = -jnp.sqrt(jnp.sum((info["goal"] - data["pos"]) ** 2) + 1e-6) - 0.01 * jnp.sum(action**2)
        done = jnp.any(jnp.abs(data["pos"]) > 2.0).astype(jnp.float32)
        return state.replace(data=data, obs=self._obs(data, info), reward=reward, done=done, info=info)


@pytest.fixture
def point_mass():
    """A fresh ``PointMass`` (its class is importable by file, ``inspect.getfile``, for
    subprocesses)."""
    return PointMass()
