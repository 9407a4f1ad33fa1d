"""Shared set-up of the backend="mujoco" tests (MuJoCo C physics with the task's shared JAX
logic, issue 7): the env ids, the BoxPush env fixture and the MJX reference helpers.

Cross-backend checks drive the MJX backend through ``GymEnv`` (so its compiled step and
grad_step come from the same persistent-cache entries as the tests under tests/envs) and
move the C env to MJX's state with ``set_state`` (cheap in C), never the other way round:
``GymEnv.set_state`` runs ``state_from`` eagerly, seconds per call.

The test files import the constants and helpers from here
(``from tests.mujoco_backend.conftest import ...``: pytest's importlib mode registers this
file under that name).
"""

import importlib

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)

ENV_ID = "bcg_envs/BoxPush-v0"
BOOKKEEPING = {
    "step",
    "bundle_window",
    "bundled",
    "sim_diverged",
    "truncated",
    "max_contact_force",
    "bundle_dropped",
    "bundle_alpha",
    "is_success",
}


def _optional(name: str, module: str):
    try:
        importlib.import_module(module)
    except Exception as err:  # noqa: BLE001 - any import failure means "not available yet"
        return pytest.param(name, marks=pytest.mark.skip(reason=f"{module} cannot be imported: {err!r}"))
    return name


TASKS = [
    "BoxPush-v0",
    _optional("PlanarHand-v0", "bcg_envs.envs.planar_hand.hand"),
    _optional("G1Squat-v0", "bcg_envs.envs.g1.tracking"),
]


@pytest.fixture(scope="module")
def env():
    """A reset BoxPush-v0 MuJoCo C env, shared by a file's tests (only test_jacobians.py uses
    it: module scope builds it once)."""
    e = gym.make(ENV_ID, backend="mujoco")
    e.reset(seed=0)
    yield e
    e.close()


def smooth_action(t: int, nu: int, amp: float = 0.5) -> np.ndarray:
    """A smooth, deterministic action at control step ``t`` (``nu`` entries in [-amp, amp])."""
    k = np.arange(nu)
    return (amp * np.sin(0.15 * t + 1.3 * k) * np.cos(0.05 * t + 0.4 * k)).astype(np.float32)


def task_info_of(info):
    """The task entries of an env's ``info`` (no bookkeeping, no reward terms), as arrays."""
    return {k: np.asarray(v) for k, v in info.items() if k not in BOOKKEEPING and not k.startswith("reward/")}


class JittedMjxStates:
    """A jitted ``state_from`` of the MJX backend (``GymEnv.set_state`` runs it eagerly,
    seconds per call)."""

    def __init__(self, jax_env):
        self.env = jax_env
        self.state_from = jax.jit(lambda q, v, info, key: jax_env.state_from(q, v, None, info, key))

    def state(self, qpos, qvel, info):
        return self.state_from(
            jnp.asarray(qpos, jnp.float32),
            jnp.asarray(qvel, jnp.float32),
            {k: jnp.asarray(v) for k, v in info.items()},
            jax.random.PRNGKey(0),
        )
