"""Gymnasium entry points: ``gym.make`` / ``gym.make_vec`` pick the env class of the
physics backend (``backend="mjx"``, the default, or ``"mujoco"``, MuJoCo C)."""

from __future__ import annotations

from typing import Any

import gymnasium

BACKENDS = ("mjx", "mujoco")


def _check(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def make_env(env_name: str, *, backend: str = "mjx", **kwargs: Any) -> gymnasium.Env:
    """``gym.make`` entry point: the MJX adapter or the MuJoCo C env of ``env_name``."""
    _check(backend)
    if backend == "mujoco":
        from bcg_envs.mujoco_backend import MujocoGymEnv

        return MujocoGymEnv(env_name, **kwargs)
    from bcg_envs.gym import GymEnv

    return GymEnv(env_name, **kwargs)


def make_vector_env(env_name: str, num_envs: int, *, backend: str = "mjx", **kwargs: Any) -> gymnasium.vector.VectorEnv:
    """``gym.make_vec`` entry point: the vmapped MJX vector env or the MuJoCo C one."""
    _check(backend)
    if backend == "mujoco":
        from bcg_envs.mujoco_backend import MujocoVectorEnv

        return MujocoVectorEnv(env_name, num_envs, **kwargs)
    from bcg_envs.gym import GymVectorEnv

    return GymVectorEnv(env_name, num_envs, **kwargs)
