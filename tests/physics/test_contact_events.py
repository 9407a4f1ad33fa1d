"""Contact events (all contacts between one pair of bodies, summed) and the ``bcg``
triggers of MJX's contact report on a box resting on and dropped onto a plane
(tests/resting_box.py), where the answer is its weight."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg_envs import BundleConfig
from bcg_envs.gradients.differentiable_step import DifferentiableStep
from bcg_envs.physics.simulator import Physics, control_step_with_contacts
from tests.resting_box import N_SUBSTEPS, THRESHOLD, WEIGHT, dropped, settled_box


@pytest.fixture(scope="module")
def box():
    return settled_box()


def _data(physics, qpos, qvel):
    return jax.jit(physics.make_data)(jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32))


def test_resting_box_is_one_event_carrying_its_weight_with_no_rise(box):
    model, qpos, qvel = box
    physics = Physics(model, N_SUBSTEPS)
    step = jax.jit(lambda data, ctrl: control_step_with_contacts(physics, data, ctrl))  # eager: a compile per op
    _, report = step(_data(physics, qpos, qvel), jnp.zeros(1))
    active = np.asarray(report.geoms)[:, 0] >= 0
    assert active.sum() >= 3  # several corner contacts ...
    force = np.asarray(report.force)[active]
    assert force == pytest.approx(WEIGHT, rel=0.03)  # ... every one reports the event: the weight
    assert np.abs(np.asarray(report.rise)).max() < 0.05 * WEIGHT
    # every slot reports its event's largest single contact: one corner's share of the weight
    point = np.asarray(report.point_force)
    assert (point[~active] == 0).all() and np.ptp(point[active]) == 0
    assert WEIGHT / active.sum() <= point[active][0] < 0.9 * WEIGHT


@pytest.mark.integration  # ~90 s: two compiles of a stepped box; the default tier keeps the event tests
@pytest.mark.parametrize("trigger", ["force", "onset", "point"])
def test_force_trigger_fires_on_a_steady_press_onset_only_on_impact(box, trigger):
    """At rest the event (the weight) is above the threshold and each corner below it."""
    model, qpos, qvel = box
    physics = Physics(model, N_SUBSTEPS)
    cfg = BundleConfig(force_threshold=THRESHOLD, trigger=trigger)
    stepper = DifferentiableStep(physics, lambda a: a, "bcg", cfg)
    key, window = jax.random.PRNGKey(0), jnp.zeros((), jnp.int32)
    (_, contact, resting), _, _ = stepper.jacobians(_data(physics, qpos, qvel), jnp.zeros(1), key, window)
    (_, impact, landing), _, _ = stepper.jacobians(_data(physics, *dropped(qpos)), jnp.zeros(1), key, window)
    assert float(jnp.max(impact.rise)) > 2 * WEIGHT  # the landing's impulse
    assert bool(landing)
    assert bool(resting) == (trigger == "force")
