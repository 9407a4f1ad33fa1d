"""Contact events (all contacts between one pair of bodies, summed) and the ``bcg``
triggers on a box resting on and dropped onto a plane, where the answer is its weight."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg_envs import BundleConfig
from bcg_envs.gradients.differentiable_step import DifferentiableStep
from bcg_envs.mujoco_backend.simulation import ContactLog
from bcg_envs.physics.simulator import Physics, control_step_with_contacts

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


@pytest.fixture(scope="module")
def box():
    model = mujoco.MjModel.from_xml_string(XML)
    d = mujoco.MjData(model)
    for _ in range(500):  # settle: 1 s
        mujoco.mj_step(model, d)
    return model, d.qpos.copy(), d.qvel.copy()


def _data(physics, qpos, qvel):
    return physics.make_data(jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32))


def _dropped(qpos):
    """1 mm above the floor, falling at 1 m/s: it lands within the next step."""
    q = np.array(qpos)
    q[2] += 0.001
    v = np.zeros(6)
    v[2] = -1.0
    return q, v


def test_resting_box_is_one_event_carrying_its_weight_with_no_rise(box):
    model, qpos, qvel = box
    physics = Physics(model, N_SUBSTEPS)
    _, report = control_step_with_contacts(physics, _data(physics, qpos, qvel), jnp.zeros(1))
    active = np.asarray(report.geoms)[:, 0] >= 0
    assert active.sum() >= 3  # several corner contacts ...
    force = np.asarray(report.force)[active]
    assert force == pytest.approx(WEIGHT, rel=0.03)  # ... every one reports the event: the weight
    assert np.abs(np.asarray(report.rise)).max() < 0.05 * WEIGHT


@pytest.mark.integration  # ~90 s: two compiles of a stepped box; the default tier keeps the event tests
@pytest.mark.parametrize("trigger", ["force", "onset"])
def test_force_trigger_fires_on_a_steady_press_onset_only_on_impact(box, trigger):
    model, qpos, qvel = box
    physics = Physics(model, N_SUBSTEPS)
    cfg = BundleConfig(force_threshold=THRESHOLD, trigger=trigger)
    stepper = DifferentiableStep(physics, lambda a: a, "bcg", cfg)
    key, window = jax.random.PRNGKey(0), jnp.zeros((), jnp.int32)
    (_, contact, resting), _, _ = stepper.jacobians(_data(physics, qpos, qvel), jnp.zeros(1), key, window)
    (_, impact, landing), _, _ = stepper.jacobians(_data(physics, *_dropped(qpos)), jnp.zeros(1), key, window)
    assert float(jnp.max(impact.rise)) > 2 * WEIGHT  # the landing's impulse
    assert bool(landing)
    assert bool(resting) == (trigger == "force")


def test_mujoco_c_contact_log_sums_events_and_measures_the_rise(box):
    model, qpos, qvel = box
    d = mujoco.MjData(model)

    def step_from(q, v):
        d.qpos[:], d.qvel[:] = q, v
        mujoco.mj_forward(model, d)
        log = ContactLog()
        log.start(model, d)
        for _ in range(N_SUBSTEPS):
            mujoco.mj_step(model, d)
            log.record(model, d)
        return log

    resting = step_from(qpos, qvel)
    assert len(resting.events) == 1 and len(resting.best) >= 3
    assert resting.max_force == pytest.approx(WEIGHT, rel=0.03)
    assert resting.max_rise < 0.05 * WEIGHT
    assert resting.pressing(BundleConfig(force_threshold=THRESHOLD)) == set(resting.events)
    assert resting.pressing(BundleConfig(force_threshold=THRESHOLD, trigger="onset")) == set()
    landing = step_from(*_dropped(qpos))
    assert landing.max_rise > 2 * WEIGHT
    assert landing.pressing(BundleConfig(force_threshold=THRESHOLD, trigger="onset")) == set(landing.events)
