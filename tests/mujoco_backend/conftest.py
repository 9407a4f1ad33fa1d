"""Shared set-up of the backend="mujoco" tests (MuJoCo C physics with the task's shared JAX
logic): the env ids, the BoxPush env fixtures (plain, and with per-episode masses:
``c_env``) and the MJX reference helpers.

Cross-backend checks drive the MJX backend through ``GymEnv`` (so its compiled step and
grad_step come from the same persistent-cache entries as the tests under tests/envs) and
move the C env to MJX's state with ``set_state`` (cheap in C), never the other way round:
``GymEnv.set_state`` runs ``state_from`` eagerly, seconds per call.

The test files import the constants and helpers from here
(``from tests.mujoco_backend.conftest import ...``: pytest's importlib mode registers this
file under that name).
"""

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)
from bcg_envs.physics import model_fields

ENV_ID = "bcg_envs/BoxPush-v0"
BOOKKEEPING = {
    "step",
    "bundle_window",
    "bundled",
    "sim_diverged",
    "truncated",
    "max_contact_force",
    "max_point_force",
    "bundle_dropped",
    "bundle_alpha",
    "is_success",
}


TASKS = ["BoxPush-v0", "PlanarHand-v0", "G1Squat-v0"]


@pytest.fixture(scope="module")
def env():
    """A reset BoxPush-v0 MuJoCo C env, shared by a file's tests (only test_jacobians.py uses
    it: module scope builds it once)."""
    e = gym.make(ENV_ID, backend="mujoco")
    e.reset(seed=0)
    yield e
    e.close()


#: BoxPush's pusher and box bodies (0 is the world, 1 the goal marker).
PUSHER, BOX = 2, 3
MASS_RANGE = (0.5, 2.0)
DRAWN = ("body_mass", "body_inertia", "body_subtreemass", "body_invweight0", "dof_invweight0")


def scale_masses(model, rng):
    """Pusher and box mass and inertia x U(0.5, 2) each, with the derived constants
    refreshed (``model_fields.mass_constants``): MuJoCo Playground's shape."""

    def draw(key):
        scale = jax.random.uniform(key, (2,), minval=MASS_RANGE[0], maxval=MASS_RANGE[1])
        fields = {
            "body_mass": model.body_mass.at[PUSHER : BOX + 1].multiply(scale),
            "body_inertia": model.body_inertia.at[PUSHER : BOX + 1].multiply(scale[:, None]),
        }
        fields.update(model_fields.mass_constants(model.tree_replace(fields)))
        return fields

    in_axes = jax.tree.map(lambda _: None, model).tree_replace({name: 0 for name in DRAWN})
    return model.tree_replace(jax.vmap(draw)(rng)), in_axes


RANDOMIZE_KWARGS = {"randomize": "episode", "randomization_fn": scale_masses}


@pytest.fixture(scope="module")
def c_env():
    """A BoxPush-v0 MuJoCo C env drawing its masses per episode (``scale_masses``), shared
    by a file's tests (test_randomize.py, test_model_fields.py)."""
    e = gym.make(ENV_ID, backend="mujoco", **RANDOMIZE_KWARGS)
    yield e.unwrapped
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
