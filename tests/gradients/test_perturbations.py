"""bcg_envs/gradients/perturbations.py on the G1: a bundle at a foot is local to its leg."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg_envs import BundleConfig
from bcg_envs.envs.g1 import constants as C
from bcg_envs.gradients.perturbations import contact_sampler, floating_base_dofs

LEFT_LEG = ("left_hip_pitch_joint", "left_hip_roll_joint", "left_hip_yaw_joint", "left_knee_joint",
            "left_ankle_pitch_joint", "left_ankle_roll_joint")


@pytest.fixture(scope="module")
def standing():
    model = mujoco.MjModel.from_xml_path(str(C.G1_XML))
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_forward(model, data)
    return model, data


def _left_sole_jacobian(model, data):
    """Relative translational Jacobians (foot minus floor) at the left foot's four sole points."""
    foot = model.body("left_ankle_roll_link").id
    rows = []
    for name in [g for g in C.FOOT_GEOMS if g.startswith("left")]:
        g = model.geom(name).id
        point = data.geom_xpos[g] - np.array([0.0, 0.0, model.geom_size[g, 0]])
        jp = np.zeros((3, model.nv))
        mujoco.mj_jac(model, data, jp, None, point, foot)
        rows.append(jp)  # the floor is the world body: its Jacobian is zero
    return np.concatenate(rows)


@pytest.mark.parametrize("space", ["cartesian", "joint"])
def test_left_foot_bundle_moves_the_left_leg_only(standing, space):
    """A bundle at the left foot's contacts perturbs the six left-leg joints and nothing
    else: not the right leg, the waist, the arms, nor (by default) the floating base."""
    model, data = standing
    nv, nu = model.nv, model.nu
    nx = 2 * nv + model.na
    J = _left_sole_jacobian(model, data)
    assert np.abs(J[:, :6]).max() > 0.1  # the sole's Jacobian does move the base
    base = floating_base_dofs(model)
    leg = np.zeros(nv, bool)
    leg[[model.jnt_dofadr[model.joint(j).id] for j in LEFT_LEG]] = True
    active = jnp.ones((J.shape[0] // 3,), bool)
    keys = jax.random.split(jax.random.PRNGKey(0), 16)
    for perturb_base, moved in ((False, leg), (True, leg | base)):
        cfg = BundleConfig(space=space, perturb_base=perturb_base)
        sample = contact_sampler(jnp.asarray(J, jnp.float32), active, nx, nv, nu, cfg,
                                 None if perturb_base else ~base)
        dx = np.asarray(jax.vmap(sample)(keys)[0])
        for block in (dx[:, :nv], dx[:, nv : 2 * nv]):
            assert np.all(block[:, ~moved] == 0), np.flatnonzero(np.abs(block).max(0) > 0)
            assert np.abs(block[:, moved]).max(0).min() > 0
