"""The penalty contact model (bcg_envs/physics/penalty_contact.py) on a box and a ball:
physically plausible, MuJoCo's own contact rows switched off, differentiable, and with
the paper's pathology (the contact derivative grows with kappa)."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg_envs.physics.penalty_contact import PenaltyContact, disable_constraint_contacts
from bcg_envs.physics.simulator import Physics

G = 9.81
MU = 0.5

TOY_XML = f"""
<mujoco>
  <option timestep="0.002" integrator="implicitfast" solver="Newton" cone="pyramidal"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" friction="{MU} 0.005 0.0001"/>
    <body name="box" pos="0 0 0.05">
      <freejoint/>
      <geom name="box" type="box" size="0.05 0.05 0.05" mass="1" friction="{MU} 0.005 0.0001"/>
    </body>
    <body name="ball" pos="1 0 0.5">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.05" mass="0.5" friction="{MU} 0.005 0.0001"/>
    </body>
  </worldbody>
</mujoco>
"""


def toy_physics(kappa: float = 300.0, substeps: int = 10) -> Physics:
    model = mujoco.MjModel.from_xml_string(TOY_XML)
    disable_constraint_contacts(model)
    return Physics(model, substeps, PenaltyContact(kappa=kappa))


def run(physics: Physics, qpos, qvel, steps: int):
    step = jax.jit(lambda d: physics.control_step(d, jnp.zeros(0)))
    d = physics.make_data(jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32))
    traj = []
    for _ in range(steps):
        d = step(d)
        traj.append((np.asarray(d.qpos), np.asarray(d.qvel)))
    return d, traj


def start(box=(0.0, 0.0, 0.05), box_vel=(0, 0, 0), ball_z=0.5):
    qpos = np.array([*box, 1, 0, 0, 0, 1.0, 0.0, ball_z, 1, 0, 0, 0], np.float32)
    qvel = np.zeros(12, np.float32)
    qvel[:3] = box_vel
    return qpos, qvel


@pytest.fixture(scope="module")
def physics():
    return toy_physics()


@pytest.mark.integration
def test_contact_forces_carry_the_weight_and_the_box_stays_put():
    """MuJoCo's contact rows stay inactive; the forces reported per contact (the bundle
    trigger reads them) are the penalty's, and over time they carry the box's weight
    (it micro-bounces on a 0.1 mm scale, so single substeps vary)."""
    physics = toy_physics(substeps=1)
    qpos, qvel = start()
    step = jax.jit(lambda d: physics.control_step(d, jnp.zeros(0)))
    d = physics.make_data(jnp.asarray(qpos), jnp.asarray(qvel))
    totals = []
    for i in range(500):  # 1 s
        d = step(d)
        on_box = np.asarray(physics.contact_geoms(d))[:, 1] == 1
        totals.append(np.asarray(physics.contact_normal_forces(d))[on_box].sum())
    assert np.mean(totals[250:]) == pytest.approx(1.0 * G, rel=0.05)
    assert min(totals) >= 0 and np.isfinite(totals).all()
    q, v = np.asarray(d.qpos), np.asarray(d.qvel)
    assert np.abs(q[:2]).max() < 1e-3 and abs(q[2] - 0.05) < 2e-3 and np.abs(v[:6]).max() < 2e-2


@pytest.mark.integration
def test_a_dropped_ball_lands_and_rests_on_the_floor(physics):
    qpos, qvel = start(ball_z=0.5)
    _, traj = run(physics, qpos, qvel, 75)  # 1.5 s: lands after 0.3 s
    z = np.array([q[9] for q, _ in traj])
    assert z.min() > 0.05 - 0.01  # no tunnelling: at most 1 cm into the floor
    assert abs(z[-1] - 0.05) < 5e-3 and abs(traj[-1][1][8]) < 1e-2  # at rest on it
    assert np.all(np.diff(z[:10]) < 0)  # fell first


@pytest.mark.integration  # ~55 s: a long rollout compile
def test_a_sliding_box_stops_after_the_coulomb_distance(physics):
    """Kinetic friction mu m g decelerates a sliding box at mu g: it stops after
    v0^2 / (2 mu g) (0.102 m from 1 m/s at mu 0.5)."""
    qpos, qvel = start(box_vel=(1.0, 0.0, 0.0))
    _, traj = run(physics, qpos, qvel, 50)
    x, v = traj[-1][0][0], traj[-1][1][0]
    assert abs(v) < 1e-2
    assert x == pytest.approx(1.0 / (2 * MU * G), rel=0.1)


@pytest.mark.integration  # ~55 s: a 50-substep reverse-mode compile; tests/gradients/test_ball_wall.py checks the penalty derivative by default
def test_gradients_match_finite_differences_and_coulomb_sliding():
    """d(ball position after 0.1 s)/d(initial velocity) of a ball sliding (not yet
    rolling: that starts after 2 v0 / (7 mu g) = 0.12 s) on the floor: reverse mode
    through the penalty step vs central differences, and both vs Coulomb's closed form
    x = x0 + v0 t - mu g t^2 / 2 * v0 / |v0| (no regime switch on the way)."""
    v0 = np.array([2.0, 0.6], np.float32)
    qpos, qvel = start(ball_z=0.05)
    t = 0.1
    physics = toy_physics(substeps=50)  # one control step of 0.1 s

    def final_xy(v):
        d = physics.make_data(jnp.asarray(qpos), jnp.asarray(qvel).at[6:8].set(v))
        return physics.control_step(d, jnp.zeros(0)).qpos[7:9]

    # one program for the Jacobian and the values (a second compile costs more than the
    # reverse pass it saves)
    jac_and_value = jax.jit(jax.jacrev(lambda v: (final_xy(v), final_xy(v)), has_aux=True))
    jac = np.asarray(jac_and_value(jnp.asarray(v0))[0])

    def f(v):
        return jac_and_value(jnp.asarray(v))[1]

    eps = 2e-2
    fd = np.stack(
        [(np.asarray(f(v0 + eps * e)) - np.asarray(f(v0 - eps * e))) / (2 * eps) for e in np.eye(2, dtype=np.float32)],
        1,
    )
    speed = np.linalg.norm(v0)
    u = v0 / speed
    closed_form = t * np.eye(2) - MU * G * t**2 / 2 * (np.eye(2) - np.outer(u, u)) / speed
    assert np.isfinite(jac).all()
    np.testing.assert_allclose(jac, fd, atol=0.02 * np.abs(fd).max())
    np.testing.assert_allclose(jac, closed_form, atol=0.05 * np.abs(closed_form).max())
    x = np.asarray(f(v0))
    np.testing.assert_allclose(x - np.array([1.0, 0.0]), v0 * t - MU * G * t**2 / 2 * u, atol=5e-3)


@pytest.mark.integration
def test_contact_derivative_grows_with_kappa():
    """The paper's pathology: the derivative of a ball's post-step velocity with respect to
    its height as it closes on the floor (no penetration yet: the impulse is the sigmoid's
    alone) grows in proportion to the sigmoid's sharpness."""
    peaks = {}
    for kappa in (50.0, 500.0):
        physics = toy_physics(kappa, substeps=1)
        qpos, qvel = start(ball_z=0.5)

        def vz_after(z):
            d = physics.make_data(jnp.asarray(qpos).at[9].set(z), jnp.asarray(qvel).at[8].set(-1.0))
            return physics.control_step(d, jnp.zeros(0)).qvel[8]

        heights = jnp.linspace(0.05, 0.08, 151)
        peaks[kappa] = float(jnp.max(jnp.abs(jax.jit(jax.vmap(jax.grad(vz_after)))(heights))))
    assert np.isfinite(list(peaks.values())).all()
    assert peaks[500.0] > 5 * peaks[50.0], peaks


@pytest.mark.integration
def test_g1_stands_on_the_penalty_floor():
    """The G1 stand keyframe held by its PD servos for 1 s on the kappa = 300 floor: the
    pelvis stays within 3 cm of the keyframe height and upright, the feet carry the robot,
    nothing moves faster than 0.2 m/s or rad/s. (Held longer, the open-loop pose tips
    forward slowly on this compliant floor: the sigmoid spreads the support over ~4 /
    kappa of penetration; it drifts 7 cm in 2 s on MuJoCo's contact too.)"""
    from bcg_envs.envs.g1 import constants as C

    model = mujoco.MjModel.from_xml_path(str(C.G1_XML))
    disable_constraint_contacts(model)
    physics = Physics(model, 5, PenaltyContact(kappa=300.0))
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key(C.STAND_KEYFRAME).id)
    ctrl = jnp.asarray(C.DEFAULT_POSE, jnp.float32)

    @jax.jit
    def stand(d):
        def body(d, _):
            d = physics.control_step(d, ctrl)
            return d, d.qpos[2]

        return jax.lax.scan(body, d, None, length=50)

    d, heights = stand(physics.make_data(jnp.asarray(data.qpos, jnp.float32), jnp.zeros(model.nv, jnp.float32)))
    heights, qpos, qvel = np.asarray(heights), np.asarray(d.qpos), np.asarray(d.qvel)
    assert np.isfinite(qpos).all() and np.isfinite(qvel).all()
    assert np.abs(heights - C.DEFAULT_ROOT_HEIGHT).max() < 0.03
    assert np.abs(qvel).max() < 0.2
    up = np.zeros(9)
    mujoco.mju_quat2Mat(up, qpos[3:7].astype(np.float64))
    assert up[8] > 0.98
    feet = np.asarray(physics.contact_normal_forces(d))
    assert feet.sum() == pytest.approx(float(np.sum(model.body_mass)) * G, rel=0.1)  # carries the robot


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(kappa=0.0), "kappa must be a positive"),
        (dict(slip_velocity=-1e-3), "slip_velocity must be a positive"),
        (dict(baumgarte=-0.1), r"baumgarte must be in \[0, 1\]"),
        (dict(baumgarte=1.5), r"baumgarte must be in \[0, 1\]"),
        (dict(baumgarte=float("nan")), "baumgarte must be a finite number"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PenaltyContact(**kwargs)


@pytest.mark.integration  # ~45 s: two physics compiles
def test_baumgarte_zero_stops_the_approach_without_pushing_out():
    """A ball at rest 5 mm into the floor, one 2 ms substep: without the Baumgarte term the
    impulse only cancels the approach (gravity's h g at most, scaled by the activation), so
    the ball does not rise; with 0.2 it is pushed out at ~0.2 p / h (0.5 m/s) times the
    activation sigmoid(300 * 0.005) = 0.82."""
    qpos, qvel = start(ball_z=0.045)
    rise = {}
    for beta in (0.0, 0.2):
        model = mujoco.MjModel.from_xml_string(TOY_XML)
        disable_constraint_contacts(model)
        physics = Physics(model, 1, PenaltyContact(kappa=300.0, baumgarte=beta))
        d = physics.make_data(jnp.asarray(qpos), jnp.asarray(qvel))
        rise[beta] = float(jax.jit(lambda d: physics.control_step(d, jnp.zeros(0)))(d).qvel[8])
    assert -G * 0.002 <= rise[0.0] <= 0.0
    assert rise[0.2] == pytest.approx(0.82 * 0.2 * 0.005 / 0.002 + rise[0.0], rel=0.1)
