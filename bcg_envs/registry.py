"""Environment registry: short names -> task classes, and Gymnasium registration."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List, Type

import gymnasium

if TYPE_CHECKING:
    from bcg_envs.envs.base import MjxEnv

NAMESPACE = "bcg_envs"

#: short id -> "module:Class" of the JAX task.
_TASKS: Dict[str, str] = {
    "BoxPush-v0": "bcg_envs.envs.box_push.push:BoxPush",
    "PlanarHand-v0": "bcg_envs.envs.planar_hand.hand:PlanarHand",
    "G1Jump-v0": "bcg_envs.envs.g1.tracking:G1Jump",
    "G1Squat-v0": "bcg_envs.envs.g1.tracking:G1Squat",
    "G1Kick-v0": "bcg_envs.envs.g1.tracking:G1Kick",
    "G1Track-v0": "bcg_envs.envs.g1.tracking:G1Track",
}


def task_names() -> List[str]:
    return list(_TASKS)


def add_task(name: str, target: str) -> None:
    _TASKS[name] = target


def short_name(env_id: str) -> str:
    """'bcg_envs/BoxPush-v0' or 'BoxPush-v0' -> 'BoxPush-v0' (ValueError if unknown)."""
    name = env_id.split("/", 1)[1] if env_id.startswith(NAMESPACE + "/") else env_id
    if name not in _TASKS:
        raise ValueError(f"unknown env id {env_id!r}; registered ids: {list_envs()}")
    return name


def task_class(env_id: str) -> Type[MjxEnv]:
    module, cls = _TASKS[short_name(env_id)].split(":")
    return getattr(importlib.import_module(module), cls)


def make_jax(env_id: str, **kwargs: Any) -> MjxEnv:
    """The functional JAX env: ``reset(key)``, ``step(state, action)``.

    The env goes unchanged into Brax's trainers (``brax.training.agents.ppo.train``):
    the first call applies ``bcg_envs.compat.enable_brax``, which re-exposes the two
    ``jax`` functions Brax 0.14.2 still calls (only where they are missing).
    """
    from bcg_envs.compat import enable_brax
    from bcg_envs.process_safety import check_process

    check_process(env_id)
    enable_brax()
    cls = task_class(env_id)
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise TypeError(f"{env_id}: {err}; accepted kwargs: {_accepted_kwargs(cls)}") from None


def _accepted_kwargs(cls) -> List[str]:
    import inspect

    names = []
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            names += [p for p in inspect.signature(klass.__init__).parameters if p not in ("self", "args", "kwargs")]
    return sorted(set(names))


def list_envs() -> List[str]:
    """Registered Gymnasium ids, e.g. ``'bcg_envs/BoxPush-v0'``."""
    return [f"{NAMESPACE}/{name}" for name in _TASKS]


def register_all() -> None:
    for name in _TASKS:
        env_id = f"{NAMESPACE}/{name}"
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id,
            entry_point="bcg_envs.gym:GymEnv",
            vector_entry_point="bcg_envs.gym:GymVectorEnv",
            kwargs={"env_name": name},
            disable_env_checker=False,
        )
