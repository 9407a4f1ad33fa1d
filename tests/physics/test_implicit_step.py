"""``implicit_step.step`` against MuJoCo C on a hinge driven by a force-limited position
servo under ``implicitfast`` (G1's actuators are of this kind).

MuJoCo C leaves a clamped actuator's velocity gain (``kv``) out of the implicit update
(its force no longer depends on velocity); MJX 3.17's ``implicitfast`` keeps it, and
``implicit_step`` removes it (``clamp_aware``). The step must match MuJoCo C on both sides
of the clamp, in value and in its derivative with respect to velocity."""

import gymnasium as gym
import jax
import mujoco
import numpy as np
import pytest
from mujoco import mjx

import bcg_envs  # noqa: F401  (registers the environment ids)
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


def test_the_step_matches_mujoco_with_the_servo_force_clamped(steps):
    mjx_v, c_v, clamped = steps(4.0, -1.0)  # force -100 - 12: clamped at -5 N m
    assert clamped
    # v' = v + h (-5) / I: the clamped force's own value, with no implicit damping
    # (MJX's own implicitfast would divide by I + h kv).
    assert c_v == pytest.approx(4.0 - 0.004 * 5.0 / steps.inertia, rel=1e-4)
    assert mjx_v == pytest.approx(c_v, rel=1e-5)


def test_mjx_alone_keeps_the_clamped_servos_damping(steps):
    """The reason for ``clamp_aware``: without it MJX's step differs. If a new ``mujoco-mjx``
    drops the term itself, this fails and ``clamp_aware`` can go."""
    model = mujoco.MjModel.from_xml_string(XML)
    mx = mjx.put_model(model)
    d = mjx.make_data(mx).replace(qvel=np.array([4.0], np.float32), ctrl=np.array([-1.0], np.float32))
    plain = float(jax.jit(mjx.step)(mx, d).qvel[0])
    assert plain == pytest.approx(4.0 - 0.004 * 5.0 / (steps.inertia + 0.004 * 3.0), rel=1e-4)


@pytest.mark.parametrize("qvel, ctrl", [(0.3, 0.01), (4.0, -1.0)])
def test_velocity_derivative_matches_mujoco_finite_differences(qvel, ctrl):
    """d qvel' / d qvel of the step against central differences of ``mj_step`` (float64)."""
    model = mujoco.MjModel.from_xml_string(XML)
    mx = mjx.put_model(model)
    ctrl_ = jax.numpy.array([ctrl], jax.numpy.float32)
    grad = jax.jit(jax.grad(lambda v: implicit_step.step(mx, mjx.make_data(mx).replace(qvel=v, ctrl=ctrl_)).qvel[0]))
    got = float(grad(np.array([qvel], np.float32))[0])

    def c_step(v: float) -> float:
        d = mujoco.MjData(model)
        d.qvel[:], d.ctrl[:] = v, ctrl
        mujoco.mj_step(model, d)
        return float(d.qvel[0])

    eps = 1e-6
    want = (c_step(qvel + eps) - c_step(qvel - eps)) / (2 * eps)
    assert got == pytest.approx(want, rel=1e-4)


@pytest.mark.parametrize("qvel, ctrl, clamped", [(0.3, 0.01, False), (4.0, -1.0, True)])
def test_integration_mass_leaves_out_a_clamped_servos_damping(steps, qvel, ctrl, clamped):
    """The matrix the Moreau and penalty contact paths invert: ``I + h kv``, or ``I`` clamped."""
    model = mujoco.MjModel.from_xml_string(XML)
    mx = mjx.put_model(model)
    d = mjx.make_data(mx).replace(qvel=jax.numpy.array([qvel]), ctrl=jax.numpy.array([ctrl]))
    mass_of = jax.jit(lambda d: implicit_step.integration_mass(mx, implicit_step.forward(mx, d)))
    mass = float(mass_of(d)[0, 0])
    assert mass == pytest.approx(steps.inertia + (0.0 if clamped else 0.004 * 3.0), rel=1e-5)


@pytest.mark.integration
def test_g1_steps_like_mujoco_where_its_torques_saturate():
    """G1 (every actuator force-limited) from in-flight states under random controls, five
    physics steps: ``implicit_step.step`` matches ``mj_step``; MJX's own step does not."""
    env = gym.make("bcg_envs/G1Jump-v0")
    env.reset(seed=0)
    task = env.unwrapped.jax_env
    model = task.mj_model
    mx = mjx.put_model(model)
    ours = jax.jit(lambda d: jax.lax.fori_loop(0, 5, lambda _, x: implicit_step.step(mx, x), d))
    plain = jax.jit(lambda d: jax.lax.fori_loop(0, 5, lambda _, x: mjx.step(mx, x), d))
    rng = np.random.default_rng(0)
    low, high = env.action_space.low, env.action_space.high
    saturated = 0
    for _ in range(3):
        for _ in range(int(rng.integers(1, 10))):
            env.step(rng.uniform(low, high).astype(np.float32))
        state = env.unwrapped.simulation.state
        qpos, qvel = np.asarray(state.data.qpos, float), np.asarray(state.data.qvel, float)
        action = jax.numpy.asarray(rng.uniform(low, high), jax.numpy.float32)
        ctrl = np.asarray(task.action_to_ctrl(task.physics_action(action, state.info)), float)
        d = mujoco.MjData(model)
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
        for _ in range(5):
            mujoco.mj_step(model, d)
        saturated += int(np.any(np.isin(d.actuator_force, model.actuator_forcerange)))
        start = mjx.make_data(mx).replace(
            qpos=jax.numpy.asarray(qpos), qvel=jax.numpy.asarray(qvel), ctrl=jax.numpy.asarray(ctrl)
        )
        rel = lambda x: float(np.linalg.norm(np.asarray(x) - d.qvel) / np.linalg.norm(d.qvel))
        assert rel(ours(start).qvel) < 1e-4
        assert rel(plain(start).qvel) > 1e-2
    assert saturated > 0
