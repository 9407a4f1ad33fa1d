"""bcg_envs/mujoco_backend/contact_log.py: MuJoCo C's contact log of a control step on the
box resting on and dropped onto a plane (tests/resting_box.py), where the answer is its
weight."""

import mujoco
import pytest

from bcg_envs import BundleConfig
from bcg_envs.mujoco_backend.contact_log import ContactLog
from tests.resting_box import N_SUBSTEPS, THRESHOLD, WEIGHT, dropped, settled_box


@pytest.fixture(scope="module")
def box():
    return settled_box()


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
    # one corner carries a share of the weight: below the threshold the weight is above
    assert WEIGHT / len(resting.best) <= resting.max_point_force < THRESHOLD
    assert resting.pressing(BundleConfig(force_threshold=THRESHOLD, trigger="point")) == set()
    landing = step_from(*dropped(qpos))
    assert landing.max_rise > 2 * WEIGHT
    assert landing.pressing(BundleConfig(force_threshold=THRESHOLD, trigger="onset")) == set(landing.events)
    assert landing.pressing(BundleConfig(force_threshold=THRESHOLD, trigger="point")) == set(landing.events)
