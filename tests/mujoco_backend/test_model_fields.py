"""bcg_envs/mujoco_backend/model_fields.py: MJX model fields written into a C model change
what MJX's episode model changes, and nothing else."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg_envs.mujoco_backend.model_fields import write_model_fields
from bcg_envs.physics import model_fields
from tests.mujoco_backend.conftest import DRAWN


def test_written_model_differs_only_where_mjx_does(c_env):
    """``write_model_fields`` changes the drawn fields and ``dof_M0`` (MuJoCo C's mass
    matrix of simple bodies) and nothing else: with a function that draws masses only, the
    derived constants stay the model's own, as in MJX's episode model."""
    nominal = c_env.jax_env.mj_model

    def arrays(m):
        names = [n for n in dir(m) if not n.startswith("_")]
        return {n: getattr(m, n).copy() for n in names if isinstance(getattr(m, n, None), np.ndarray)}

    def masses_only(model, rng):
        n = rng.shape[0]
        fields = {name: jnp.stack([getattr(model, name) * 1.5] * n) for name in ("body_mass", "body_inertia")}
        return model.tree_replace(fields), jax.tree.map(lambda _: None, model).tree_replace(dict.fromkeys(fields, 0))

    drawn_by_reset = model_fields.from_info(c_env.reset(seed=2)[1])
    masses = model_fields.draw_fields(masses_only, c_env.jax_env.physics.model, jax.random.PRNGKey(0))
    for fields, drawn in ((drawn_by_reset, set(DRAWN)), (masses, {"body_mass", "body_inertia"})):
        m = nominal.__copy__()
        write_model_fields(m, mujoco.MjData(m), fields)
        before, after = arrays(nominal), arrays(m)
        changed = {n for n in before if not np.array_equal(before[n], after[n])}
        assert changed == drawn | {"dof_M0"}, sorted(changed)
        for name, value in fields.items():
            np.testing.assert_array_equal(after[name], np.asarray(value, np.float64), err_msg=name)
    with pytest.raises(ValueError, match="'body_mass' has shape"):
        write_model_fields(m, mujoco.MjData(m), {"body_mass": np.ones(2)})
    with pytest.raises(ValueError, match="'no_such_field' has no counterpart"):
        write_model_fields(m, mujoco.MjData(m), {"no_such_field": np.ones(2)})
