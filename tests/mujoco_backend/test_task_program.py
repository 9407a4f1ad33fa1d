"""bcg_envs/mujoco_backend/task_program.py: the task program reads exactly what
``mjx.put_data`` would give."""

import jax
import numpy as np
import pytest
from mujoco import mjx

from bcg_envs.gym import GymEnv
from tests.mujoco_backend.conftest import TASKS


@pytest.mark.parametrize("name", TASKS)
def test_task_leaves_match_put_data(name):
    """The packed leaves (public fields, contacts and constraint rows reordered into MJX's
    slots) equal ``mjx.put_data``'s, at states with contacts."""
    e = GymEnv(name, backend="mujoco")
    e.reset(seed=1)
    program = e.unwrapped.simulation.task.program
    assert not program.slow, program.slow  # every leaf the task reads has a fast copy
    rng = np.random.default_rng(0)
    contacts = 0
    for t in range(60):
        e.step(rng.uniform(-1, 1, e.action_space.shape).astype(np.float32))
        d = e.unwrapped.data
        contacts += d.ncon > 0
        if t % 15:
            continue
        ours = program.read(d)
        ref = jax.tree_util.tree_leaves(mjx.put_data(e.unwrapped.model, d))
        for i, value in ours.items():
            np.testing.assert_allclose(
                value, np.asarray(ref[i], np.float64), rtol=1e-6, atol=1e-6, err_msg=program.leaves[i].path
            )
    e.close()
