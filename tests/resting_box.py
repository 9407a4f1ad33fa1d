"""A box resting on a plane, and the same box dropped onto it: the contact-event scene of
both backends' tests (tests/physics/test_contact_events.py, MJX's contact report;
tests/mujoco_backend/test_contact_log.py, MuJoCo C's contact log), where the answer is
the box's weight."""

import mujoco
import numpy as np

MASS = 2.0  # kg: 19.6 N of weight, shared by the box's four corner contacts
WEIGHT = MASS * 9.81
XML = f"""
<mujoco>
  <option timestep="0.002" integrator="implicitfast" solver="Newton" cone="pyramidal"/>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="box" pos="0 0 0.05">
      <freejoint name="free"/>
      <geom type="box" size="0.05 0.05 0.05" mass="{MASS}"/>
    </body>
  </worldbody>
  <actuator><motor joint="free" gear="0 0 1 0 0 0" ctrlrange="-1 1"/></actuator>
</mujoco>
"""
N_SUBSTEPS = 10  # 20 ms control steps
THRESHOLD = 10.0  # N: below the weight, far below an impact's rise


def settled_box():
    """(model, qpos, qvel) of the box at rest on the plane, after 1 s of settling."""
    model = mujoco.MjModel.from_xml_string(XML)
    d = mujoco.MjData(model)
    for _ in range(500):  # settle: 1 s
        mujoco.mj_step(model, d)
    return model, d.qpos.copy(), d.qvel.copy()


def dropped(qpos):
    """1 mm above the floor, falling at 1 m/s: it lands within the next step."""
    q = np.array(qpos)
    q[2] += 0.001
    v = np.zeros(6)
    v[2] = -1.0
    return q, v
