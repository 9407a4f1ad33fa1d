"""Tangent-space coordinates against MuJoCo's own ``mj_integratePos`` and
``mj_differentiatePos`` on a model with every joint type (free, ball, hinge, slide)."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg_envs.physics import tangent

XML = """<mujoco>
  <worldbody>
    <body name="base">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <body name="ball_link" pos="0 0 0.2">
        <joint name="ball" type="ball"/>
        <geom type="capsule" size="0.02" fromto="0 0 0 0 0 0.2"/>
        <body name="hinge_link" pos="0 0 0.2">
          <joint name="hinge" type="hinge" axis="0 1 0"/>
          <joint name="slide" type="slide" axis="1 0 0"/>
          <geom type="sphere" size="0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_string(XML)


def _random_qpos(model, rng):
    qpos = rng.normal(size=model.nq)
    for jtype, adr in zip(model.jnt_type.tolist(), model.jnt_qposadr.tolist()):
        if jtype in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL):
            adr += 3 if jtype == mujoco.mjtJoint.mjJNT_FREE else 0
            qpos[adr : adr + 4] /= np.linalg.norm(qpos[adr : adr + 4])
    return qpos


def test_integrate_and_difference_match_mujoco(model):
    rng = np.random.default_rng(0)
    integrate = jax.jit(lambda q, dq: tangent.integrate_pos(model, q, dq))
    difference = jax.jit(lambda q, ref: tangent.difference_pos(model, q, ref))
    assert tangent.has_quaternions(model) and (model.nq, model.nv) == (13, 11)
    for scale in (1e-7, 0.3, 2.0):  # the small-angle series, ordinary and large rotations
        qpos, dq = _random_qpos(model, rng), scale * rng.normal(size=model.nv)
        want = qpos.copy()
        mujoco.mj_integratePos(model, want, dq, 1.0)
        got = np.asarray(integrate(jnp.asarray(qpos), jnp.asarray(dq)), np.float64)
        np.testing.assert_allclose(got, want, atol=1e-6)
        back = np.zeros(model.nv)
        mujoco.mj_differentiatePos(model, back, 1.0, qpos, want)
        got_dq = np.asarray(difference(jnp.asarray(want), jnp.asarray(qpos)), np.float64)
        np.testing.assert_allclose(got_dq, back, atol=1e-5)
        if scale < 1:  # rotations below pi: the difference returns the displacement itself
            np.testing.assert_allclose(got_dq, dq, atol=1e-5)


def test_difference_takes_the_shortest_arc_and_is_smooth_at_zero(model):
    """A quaternion and its negative are one rotation; the derivative of ``qpos (+) dq``
    at ``dq = 0`` is finite (the series branch) and maps a rotation vector to half of it
    in the quaternion's vector part at the identity."""
    rng = np.random.default_rng(1)
    qpos = jnp.asarray(_random_qpos(model, rng))
    flipped = qpos.at[3:7].multiply(-1.0).at[7:11].multiply(-1.0)
    difference = jax.jit(lambda q, ref: tangent.difference_pos(model, q, ref))
    np.testing.assert_allclose(np.asarray(difference(flipped, qpos)), 0.0, atol=1e-6)
    identity = jnp.zeros(model.nq).at[3].set(1.0).at[7].set(1.0)
    J = jax.jit(jax.jacfwd(lambda dq: tangent.integrate_pos(model, identity, dq)))(jnp.zeros(model.nv))
    J = np.asarray(J)
    assert np.isfinite(J).all()
    np.testing.assert_allclose(J[4:7, 3:6], 0.5 * np.eye(3), atol=1e-7)  # free joint's rotation
    np.testing.assert_allclose(J[8:11, 6:9], 0.5 * np.eye(3), atol=1e-7)  # ball joint
    np.testing.assert_allclose(J[0:3, 0:3], np.eye(3))
    np.testing.assert_allclose(J[11:13, 9:11], np.eye(2))
