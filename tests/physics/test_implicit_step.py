"""``implicit_step.step`` against MuJoCo C on a hinge driven by a force-limited position
servo under ``implicitfast`` (G1's actuators are of this kind).

MuJoCo C leaves a clamped actuator's velocity gain (``kv``) out of the implicit update
(its force no longer depends on velocity); MJX keeps it implicit whatever the force. The
two steps agree while the servo's force is inside its range and differ once it is clamped.
The second test pins that difference: where MJX's physics is used to train and MuJoCo C to
score (the sim-to-sim columns of the results), saturated torques are part of the gap. If a
new ``mujoco-mjx`` closes it, the test fails and the docs' statement must go."""

import jax
import mujoco
import numpy as np
import pytest
from mujoco import mjx

from bcg_envs.physics import implicit_step

XML = """<mujoco>
  <option timestep="0.004" integrator="implicitfast" solver="Newton" gravity="0 0 0"/>
  <worldbody>
    <body>
      <joint name="hinge" type="hinge" axis="0 1 0" armature="0.01"/>
      <geom type="capsule" size="0.02" fromto="0 0 0 0.3 0 0" mass="1"/>
    </body>
  </worldbody>
  <actuator>
    <position joint="hinge" kp="100" kv="3" forcerange="-5 5"/>
  </actuator>
</mujoco>"""


@pytest.fixture(scope="module")
def steps():
    """``(qvel_mjx, qvel_c)`` after one step from ``(qvel, ctrl)``."""
    model = mujoco.MjModel.from_xml_string(XML)
    mx = mjx.put_model(model)
    step = jax.jit(lambda qvel, ctrl: implicit_step.step(mx, mjx.make_data(mx).replace(qvel=qvel, ctrl=ctrl)).qvel)

    def both(qvel: float, ctrl: float):
        d = mujoco.MjData(model)
        d.qvel[:], d.ctrl[:] = qvel, ctrl
        mujoco.mj_step(model, d)
        got = step(np.array([qvel], np.float32), np.array([ctrl], np.float32))
        return float(got[0]), float(d.qvel[0]), abs(float(d.actuator_force[0])) >= 5.0

    d = mujoco.MjData(model)
    mujoco.mj_forward(model, d)
    inertia = np.zeros(1)
    mujoco.mj_mulM(model, d, inertia, np.ones(1))
    both.inertia = float(inertia[0])  # kg m^2 about the hinge, armature included
    return both


def test_the_step_matches_mujoco_while_the_servo_force_is_in_range(steps):
    mjx_v, c_v, clamped = steps(0.3, 0.01)  # force kp q_err - kv v = 1 - 0.9: inside +-5 N m
    assert not clamped
    assert mjx_v == pytest.approx(c_v, rel=1e-5)


def test_mjx_keeps_a_clamped_servos_damping_implicit_where_mujoco_drops_it(steps):
    mjx_v, c_v, clamped = steps(4.0, -1.0)  # force -100 - 12: clamped at -5 N m
    assert clamped
    # MuJoCo C: v' = v + h (-5) / I, the force's own value. MJX also divides by
    # (I + h kv), a damping the clamped force does not have: a smaller change.
    inertia = steps.inertia
    assert c_v == pytest.approx(4.0 - 0.004 * 5.0 / inertia, rel=1e-4)
    assert mjx_v == pytest.approx(4.0 - 0.004 * 5.0 / (inertia + 0.004 * 3.0), rel=1e-4)
