"""bcg_envs/mujoco_backend/task_spec.py: what the C backend takes from a task."""

import jax
import pytest

from bcg_envs.envs.base import BRANCH_INFO
from bcg_envs.gym import GymEnv
from bcg_envs.mujoco_backend.task_spec import TaskSpec
from bcg_envs.registry import make_jax
from tests.mujoco_backend.conftest import TASKS


@pytest.mark.parametrize("name", TASKS[:2])
def test_info_spec_is_that_of_reset(name):
    """The info entries' shapes and dtypes, found without tracing ``reset`` (mjx.forward),
    are those of a reset state's info (but ``rng`` and the bcg branch entries)."""
    env = make_jax(name)
    spec = TaskSpec.from_env(name, env)
    ref = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).info
    ref = {k: (v.shape, v.dtype) for k, v in ref.items() if k != "rng" and k not in BRANCH_INFO}
    assert list(spec.info_spec) == list(ref)
    assert {k: (v.shape, v.dtype) for k, v in spec.info_spec.items()} == ref


def test_spec_of_a_built_env():
    env = make_jax("BoxPush-v0")
    spec = TaskSpec.from_env("BoxPush-v0", env)
    assert spec.task is env and spec.task_class is type(env) and spec.mj_model is env.mj_model
    assert spec.n_substeps == env.physics.n_substeps and spec.episode_length == env.episode_length
    assert spec.reward_keys == list(env.config["reward_weights"])
    assert spec.physics_action is None  # BoxPush keeps the base's identity
    g = GymEnv("BoxPush-v0", backend="mujoco", jax_env=env)
    assert g.unwrapped.jax_env is env
    assert g.unwrapped.simulation.task.program.nobs == env.observation_size
    g.close()


def test_other_contact_models_are_refused_before_building():
    with pytest.raises(ValueError, match="runs on the MJX backend only"):
        TaskSpec.make("BoxPush-v0", {"contact_model": "penalty"})
