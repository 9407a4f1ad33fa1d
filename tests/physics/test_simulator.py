"""Contact options of every task: physics timestep, MuJoCo stiffness forms, the penalty
model, and clear errors for bad combinations."""

import gymnasium as gym
import numpy as np
import pytest

import bcg_envs


def test_physics_dt_reaches_stiffer_mujoco_contact():
    with pytest.raises(ValueError, match="physics_dt"):
        bcg_envs.make_jax("BoxPush-v0", contact_stiffness=0.002)  # below 2 x the 4 ms default
    env = bcg_envs.make_jax("BoxPush-v0", contact_stiffness=0.002, physics_dt=0.001)
    assert env.mj_model.opt.timestep == pytest.approx(0.001)
    assert env.physics.n_substeps == round(env.config["ctrl_dt"] / 0.001)
    assert env.dt == pytest.approx(env.config["ctrl_dt"])  # control rate unchanged
    np.testing.assert_allclose(env.mj_model.geom_solref[:, 0], 0.002)


def test_direct_stiffness_and_damping_become_negative_solref():
    env = bcg_envs.make_jax("BoxPush-v0", contact_stiffness=(2e4, 50.0))
    np.testing.assert_allclose(env.mj_model.geom_solref, np.tile([-2e4, -50.0], (env.mj_model.ngeom, 1)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(physics_dt=0.003), "multiple of the physics timestep"),
        (dict(physics_dt=-1.0), "physics_dt"),
        (dict(contact_stiffness=(1e4,)), "two numbers"),
        (dict(contact_stiffness=(1e4, -1.0)), "damping"),
        (dict(kappa=300.0), "contact_model='penalty'"),
        (dict(contact_model="penalty", contact_stiffness="stiff"), "kappa"),
        (dict(contact_model="penalty", kappa=0.0), "kappa"),
        (dict(contact_model="rigid"), "contact_model"),
    ],
)
def test_bad_contact_options_raise_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bcg_envs.make_jax("BoxPush-v0", **kwargs)


def test_penalty_model_switches_mujoco_contact_rows_off():
    env = bcg_envs.make_jax("PlanarHand-v0", contact_model="penalty", kappa=100.0)
    assert env.contact_model == "penalty" and env.physics.penalty.kappa == 100.0
    assert np.all(env.mj_model.geom_margin < -1.0)  # no MJX contact row can activate
    default = bcg_envs.make_jax("PlanarHand-v0")
    assert default.physics.penalty is None and np.all(default.mj_model.geom_margin >= 0)


def test_penalty_model_is_mjx_only():
    with pytest.raises(ValueError, match="MJX backend only"):
        gym.make("bcg_envs/BoxPush-v0", backend="mujoco", contact_model="penalty")


def test_with_contact_stiffness_copies_the_env_and_checks_a_concrete_value():
    """The copy has the new stiffness in the MJX model (MuJoCo) or the penalty
    parameters; the original env is unchanged; bad values raise like the constructor's."""
    penalty = bcg_envs.make_jax("BoxPush-v0", contact_model="penalty", kappa=300.0)
    assert penalty.with_contact_stiffness(50.0).physics.penalty.kappa == 50.0
    assert penalty.physics.penalty.kappa == 300.0
    with pytest.raises(ValueError, match="kappa"):
        penalty.with_contact_stiffness(-1.0)
    soft = bcg_envs.make_jax("BoxPush-v0", contact_stiffness=0.02, physics_dt=0.001)
    stiff = soft.with_contact_stiffness(0.004)
    np.testing.assert_allclose(np.asarray(stiff.physics.model.geom_solref[:, 0]), 0.004)
    np.testing.assert_allclose(np.asarray(soft.physics.model.geom_solref[:, 0]), 0.02)
    np.testing.assert_allclose(
        np.asarray(stiff.physics.model.geom_solref[:, 1]), np.asarray(soft.physics.model.geom_solref[:, 1])
    )  # damping ratios kept
    with pytest.raises(ValueError, match="physics_dt"):
        soft.with_contact_stiffness(0.001)  # below 2 x the 1 ms timestep
    with pytest.raises(ValueError, match="direct"):
        bcg_envs.make_jax("BoxPush-v0", contact_stiffness=(2e4, 50.0)).with_contact_stiffness(0.02)


def test_physics_for_shapes_makes_data_of_make_datas_shapes_without_the_forward_pass():
    """``Physics.for_shapes`` (what ``observation_size`` traces ``reset`` with) skips
    ``mjx.forward``: same pytree and shapes as ``make_data``, positions left unfilled."""
    import jax
    import jax.numpy as jnp

    from bcg_envs.physics import mjx_private

    physics = bcg_envs.make_jax("PlanarHand-v0").physics
    qpos, qvel = jnp.full(physics.mj_model.nq, 0.1), jnp.zeros(physics.mj_model.nv)
    model = mjx_private.abstract_model(physics.mj_model)
    with mjx_private.without_device():
        fast = jax.eval_shape(lambda m, q, v: physics.for_shapes(m).make_data(q, v), model, qpos, qvel)
    full = jax.eval_shape(physics.make_data, qpos, qvel)
    assert jax.tree.structure(fast) == jax.tree.structure(full)
    assert jax.tree.leaves(jax.tree.map(lambda x: x.shape, fast)) == jax.tree.leaves(
        jax.tree.map(lambda x: x.shape, full)
    )
    skipped = jax.jit(lambda q, v: physics.for_shapes(physics.model).make_data(q, v).xpos)(qpos, qvel)
    assert not np.asarray(skipped).any()  # no forward pass: no kinematics
