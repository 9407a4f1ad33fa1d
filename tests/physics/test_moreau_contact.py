"""The BCG authors' contact model (bcg_envs/physics/moreau_contact.py): hand-computed
impulses of a ball on a plane, exact one-step Jacobians against finite differences, the
tasks under ``contact_model="moreau"``, the bundle trigger reading its forces, and bad
input. G1 (compile-heavy) is in the integration tier."""

import gymnasium as gym
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import bcg_envs
from bcg_envs.physics import tangent
from bcg_envs.physics.moreau_contact import MoreauContact
from bcg_envs.physics.penalty_contact import disable_constraint_contacts
from bcg_envs.physics.simulator import Physics

G = 9.81
MU = 0.5
H = 0.005
MASS = 0.5
RADIUS = 0.05

BALL_XML = f"""
<mujoco>
  <option timestep="{H}" integrator="implicitfast" solver="Newton" cone="pyramidal"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" friction="{MU} 0.005 0.0001"/>
    <body name="ball" pos="0 0 0.5">
      <freejoint name="ball"/>
      <geom name="ball" type="sphere" size="{RADIUS}" mass="{MASS}" friction="{MU} 0.005 0.0001"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="push_x" joint="ball" gear="1 0 0 0 0 0"/>
    <motor name="push_z" joint="ball" gear="0 0 1 0 0 0"/>
  </actuator>
</mujoco>
"""

#: A foot: one body with four contact spheres under its corners (as each G1 foot), so four
#: contacts coupled through the Delassus matrix, solved by the Gauss-Seidel sweeps. (A box
#: geom would do, but MJX's box-plane manifold picks corners by argmax, and symmetric ties
#: reorder the contact slots under tiny perturbations: the sweep order, and so the
#: unconverged impulses, jump.)
FOOT_XML = f"""
<mujoco>
  <option timestep="{H}" integrator="implicitfast" solver="Newton" cone="pyramidal"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" friction="{MU} 0.005 0.0001"/>
    <body name="foot" pos="0 0 0.05">
      <freejoint name="foot"/>
      <geom type="box" size="0.1 0.05 0.02" mass="2" contype="0" conaffinity="0"/>
      <geom type="sphere" size="0.01" pos=" 0.09  0.04 -0.02" mass="0.05" friction="{MU} 0.005 0.0001"/>
      <geom type="sphere" size="0.01" pos=" 0.09 -0.04 -0.02" mass="0.05" friction="{MU} 0.005 0.0001"/>
      <geom type="sphere" size="0.01" pos="-0.09  0.04 -0.02" mass="0.05" friction="{MU} 0.005 0.0001"/>
      <geom type="sphere" size="0.01" pos="-0.09 -0.04 -0.02" mass="0.05" friction="{MU} 0.005 0.0001"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="push_x" joint="foot" gear="1 0 0 0 0 0"/>
    <motor name="twist" joint="foot" gear="0 0 0 0 0 1"/>
  </actuator>
</mujoco>
"""


def physics_of(xml: str, substeps: int = 1, **params) -> Physics:
    model = mujoco.MjModel.from_xml_string(xml)
    disable_constraint_contacts(model)
    return Physics(model, substeps, moreau=MoreauContact(**params))


def ball_state(z, vx=0.0, vz=0.0):
    qpos = np.array([0.0, 0.0, z, 1.0, 0.0, 0.0, 0.0], np.float32)
    qvel = np.array([vx, 0.0, vz, 0.0, 0.0, 0.0], np.float32)
    return qpos, qvel


@pytest.fixture(scope="module")
def ball_step():
    """``run(kappa, qpos, qvel, margin=0.0, friction=None) -> (qpos, qvel, normal force
    per slot)``: one 5 ms substep of the ball; kappa is an argument of one compiled program
    per (margin, friction); ``friction`` None leaves ``MoreauContact.friction`` at its
    default."""
    programs = {}

    def run(kappa, qpos, qvel, margin=0.0, friction=None):
        key = (margin, friction)
        if key not in programs:
            extra = {} if friction is None else {"friction": friction}
            base = physics_of(BALL_XML, contact_margin=margin, **extra)

            @jax.jit
            def step(k, q, v):
                physics = base.with_contact_stiffness(k)
                d = physics.substep(physics.make_data(q, v).replace(ctrl=jnp.zeros(2)))
                return d.qpos, d.qvel, physics.contact_normal_forces(d)

            programs[key] = step
        out = programs[key](jnp.float32(kappa), jnp.asarray(qpos), jnp.asarray(qvel))
        return tuple(np.asarray(x, np.float64) for x in out)

    return run


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _reference_prox(G, c, s, mu, iterations):
    """Their ``prox_iteration_unrolled_soft`` / ``prox_loop_soft``, written out in NumPy for
    any number of contacts: start at -G_ii^-1 c_i, Gauss-Seidel in contact order, step
    1 / (1 + sum_j det G_ij), off-diagonal blocks weighted by s_j, hard cone (normal first)."""
    n = len(c)
    blocks = [[G[3 * i : 3 * i + 3, 3 * j : 3 * j + 3] for j in range(n)] for i in range(n)]
    p = [-np.linalg.inv(blocks[i][i]) @ c[i] for i in range(n)]
    for _ in range(iterations):
        for i in range(n):
            total = sum((1.0 if j == i else s[j]) * blocks[i][j] @ p[j] for j in range(n))
            r = 1.0 / (1.0 + sum(np.linalg.det(blocks[i][j]) for j in range(n)))
            q = p[i] - r * (total + c[i])
            if q[0] <= 0:
                q = np.zeros(3)
            elif np.hypot(q[1], q[2]) > mu[i] * q[0]:
                q = np.array([q[0], *(q[1:] * mu[i] * q[0] / np.hypot(q[1], q[2]))])
            p[i] = q
    return np.stack(p) * np.asarray(s)[:, None]


def test_prox_iterations_are_their_kernel():
    """``solve_impulses`` (step_cap off) against a literal NumPy transcription of their
    soft prox kernel on random Delassus matrices of 3 contacts (some sliding, some not)."""
    from bcg_envs.physics.moreau_contact import solve_impulses

    rng = np.random.default_rng(0)
    for trial in range(5):
        Jc = rng.normal(size=(9, 12)) * 0.5
        G = Jc @ Jc.T / 4.0 + 0.05 * np.eye(9)  # SPD, entries ~ 1 /kg
        c = rng.normal(size=(3, 3)) * 0.3
        c[:, 0] = -rng.uniform(0.1, 0.6, 3)  # approaching
        s = rng.uniform(0.3, 1.0, 3)
        mu = np.array([0.5, 1.0, 0.2])
        want = _reference_prox(G, c, s, mu, 10)
        got = (
            solve_impulses(
                jnp.asarray(G.reshape(3, 3, 3, 3)),
                jnp.asarray(c),
                jnp.asarray(s),
                jnp.asarray(mu),
                jnp.ones((3, 3), bool),
                10,
                step_cap=False,
            )
            * jnp.asarray(s)[:, None]
        )
        assert np.abs(want).max() > 0
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-4, atol=2e-5 * np.abs(want).max())


def test_no_impulse_above_the_plane(ball_step):
    """1 cm above the floor (gap > margin 0): free fall, no force reported."""
    qpos, qvel = ball_state(RADIUS + 0.01, vx=0.3, vz=-0.5)
    q, v, force = ball_step(300.0, qpos, qvel)
    np.testing.assert_allclose(v, [0.3, 0, -0.5 - G * H, 0, 0, 0], atol=1e-6)
    assert np.all(force == 0)
    # Moreau position update: the mean of the two velocities over the step
    assert q[2] == pytest.approx(qpos[2] + H * (qvel[2] + v[2]) / 2, abs=1e-7)


@pytest.mark.parametrize("kappa", [50.0, 300.0, 1000.0])
def test_impulse_inside_is_the_rigid_impulse_times_the_sigmoid(ball_step, kappa):
    """2 mm into the floor, falling at 0.3 m/s: the rigid impulse stops the normal velocity
    the step would end with (``m (g h - vz)``); the model applies ``sigmoid(kappa d)`` of it,
    ``d`` the penetration at the midpoint ``z + vz h/2``."""
    vz = -0.3
    qpos, qvel = ball_state(RADIUS - 0.002, vz=vz)
    q, v, force = ball_step(kappa, qpos, qvel)
    depth = RADIUS - (qpos[2] + vz * H / 2)
    s = sigmoid(kappa * depth)
    rigid = MASS * (G * H - vz)
    assert v[2] == pytest.approx(vz - G * H + s * rigid / MASS, rel=1e-5)
    assert v[2] == pytest.approx((1 - s) * (vz - G * H), rel=1e-5)  # the same, as a residual
    assert force.max() == pytest.approx(s * rigid / H, rel=1e-5)  # N, where the trigger reads it
    np.testing.assert_allclose(v[[0, 1, 3, 4, 5]], 0, atol=1e-6)  # no friction without slip
    assert q[2] == pytest.approx(qpos[2] + H * (vz + v[2]) / 2, abs=1e-7)


def test_margin_lets_contact_act_before_touching_scaled_by_the_sigmoid(ball_step):
    """With ``contact_margin`` 2 cm the ball 1 cm above the floor gets a row: the rigid
    impulse times ``sigmoid(-kappa gap)``; at margin 0 it gets none."""
    vz = -0.5
    qpos, qvel = ball_state(RADIUS + 0.01, vz=vz)
    _, v, force = ball_step(300.0, qpos, qvel, margin=0.02)
    gap = qpos[2] + vz * H / 2 - RADIUS
    s = sigmoid(-300.0 * gap)
    assert v[2] == pytest.approx((1 - s) * (vz - G * H), rel=1e-5)
    assert force.max() == pytest.approx(s * MASS * (G * H - vz) / H, rel=1e-5)


def test_sliding_friction_is_capped_at_mu_times_the_normal_impulse(ball_step):
    """Sliding at 2 m/s inside the floor, the rigid tangential impulse (stop the slip) is
    far outside the cone: the hard cone caps it at exactly mu times the normal impulse,
    against the slip. Slipping at 1 cm/s it is inside the cone: the contact point's slip
    ends at ``(1 - s)`` of its free value (the rigid impulse times s)."""
    kappa, vz = 300.0, -0.3
    qpos, qvel = ball_state(RADIUS - 0.002, vx=2.0, vz=vz)
    _, v, _ = ball_step(kappa, qpos, qvel)
    normal = MASS * (v[2] - (vz - G * H))
    tangential = MASS * (v[0] - 2.0)
    assert normal > 0 and tangential < 0
    assert -tangential == pytest.approx(MU * normal, rel=1e-4)
    assert abs(v[1]) < 1e-6
    assert v[4] > 0  # the friction impulse at the bottom (along -x) spins the ball about +y

    qpos, qvel = ball_state(RADIUS - 0.002, vx=0.01, vz=vz)
    _, v, _ = ball_step(kappa, qpos, qvel)
    depth = RADIUS - (qpos[2] + vz * H / 2)
    s = sigmoid(kappa * depth)
    lever = RADIUS - depth / 2  # MuJoCo's contact point: midway between the surfaces
    slip = v[0] - lever * v[4]  # that point's velocity along x: v + w x (0, 0, -lever)
    assert slip == pytest.approx((1 - s) * 0.01, rel=1e-4)


def test_default_friction_is_the_cone_bit_for_bit(ball_step):
    """``friction`` defaults to their hard cone: the default model and an explicit
    ``friction="cone"`` step the sliding ball to identical bits (the default path is the
    one the cone tests above check against their kernel)."""
    assert MoreauContact() == MoreauContact(friction="cone") and MoreauContact().friction == "cone"
    for vx in (0.01, 0.7):
        qpos, qvel = ball_state(RADIUS - 0.002, vx=vx, vz=-0.3)
        for a, b in zip(ball_step(300.0, qpos, qvel), ball_step(300.0, qpos, qvel, friction="cone")):
            np.testing.assert_array_equal(a, b)


def test_regularized_friction_saturates_smoothly_below_the_cone(ball_step):
    """``friction="regularized"`` on the ball 2 mm inside the floor: the friction impulse
    never exceeds the cone's ``mu p_n``; slipping slowly (1 cm/s, deep inside the cone) it
    is the cone's to 2 %; sliding at 2 m/s it is clearly below (65 %: inside the prox
    iterations the law's width in slip velocity is ``mu p_n / r``, about 6 m/s for this
    light ball), at 20 m/s near it (96 %); the normal impulse is unchanged."""
    kappa, vz = 300.0, -0.3
    for vx, lo, hi in ((0.01, 0.98, 1.0 + 1e-6), (2.0, 0.5, 0.8), (20.0, 0.93, 0.99)):
        qpos, qvel = ball_state(RADIUS - 0.002, vx=vx, vz=vz)
        (_, cone, _), (_, smooth, _) = (ball_step(kappa, qpos, qvel, friction=f) for f in ("cone", "regularized"))
        normal = MASS * (smooth[2] - (vz - G * H))
        assert normal == pytest.approx(MASS * (cone[2] - (vz - G * H)), rel=1e-5)
        t_cone, t_smooth = -MASS * (cone[0] - vx), -MASS * (smooth[0] - vx)
        assert 0 < t_smooth <= MU * normal * (1 + 1e-5)
        assert lo < t_smooth / t_cone < hi, (vx, t_smooth, t_cone)


def test_regularized_friction_has_finite_gradients_at_zero_slip():
    """The regularized law is differentiable everywhere: at zero tangential impulse, at
    zero normal impulse and at both (where ``|p_t|`` and a tanh law's ``1 / (mu p_n)`` have
    no derivative), its Jacobian is finite; at zero slip its Jacobian in ``p_t`` is
    ``mu p_n / sqrt((mu p_n)^2 + eps)`` ~ 1. Through the prox iterations of the ball's
    contact (``G = diag(1/m, 3.5/m, 3.5/m)``) approaching without slip, the impulses'
    Jacobian in the free contact velocity is finite and, deep inside the cone, the cone's:
    the rigid sticking response ``-G^-1``."""
    from bcg_envs.physics.moreau_contact import regularize_friction, solve_impulses

    mu = jnp.float32(MU)
    for p in ([0.3, 0.0, 0.0], [0.0, 0.0, 0.0], [1e-30, 0.0, 0.0], [0.3, 1e-8, 0.0], [-0.1, 0.0, 0.0]):
        jac = jax.jacobian(regularize_friction)(jnp.asarray(p, jnp.float32), mu)
        assert np.all(np.isfinite(np.asarray(jac))), (p, jac)
    jac = np.asarray(jax.jacobian(regularize_friction)(jnp.asarray([0.3, 0.0, 0.0]), mu))
    np.testing.assert_allclose(jac, np.eye(3), atol=1e-6)

    G = jnp.diag(jnp.asarray([1.0, 3.5, 3.5]) / MASS).reshape(1, 3, 1, 3)

    def jacobian(friction):
        def impulses(c):
            ones = jnp.ones((1, 3), bool)
            return solve_impulses(G, c[None], jnp.ones(1), jnp.full(1, MU), ones, 10, True, friction)[0]

        return np.asarray(jax.jit(jax.jacobian(impulses))(jnp.asarray([-0.3, 0.0, 0.0])))

    jac = jacobian("regularized")
    assert np.all(np.isfinite(jac))
    np.testing.assert_allclose(jac, -MASS * np.diag([1.0, 1 / 3.5, 1 / 3.5]), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(jac, jacobian("cone"), rtol=1e-4, atol=1e-7)


@pytest.mark.integration
@pytest.mark.parametrize("xml", ["ball", "foot"], ids=["ball", "foot-4-contacts"])
def test_step_jacobians_match_finite_differences_in_float64(xml):
    """A = d(next state)/d(state) and B = d(next state)/d(ctrl) of one control step (two
    substeps) by forward-mode autodiff through the unrolled prox iterations vs central
    differences of the same step, float64, at a state inside the floor, sliding (on the
    cone's boundary) and away from switching points."""
    with jax.enable_x64(True):
        if xml == "ball":
            physics = physics_of(BALL_XML, substeps=2, kappa=300.0)
            qpos = np.array([0.0, 0.0, RADIUS - 0.003, 1.0, 0.0, 0.0, 0.0])
            qvel = np.array([1.2, -0.4, -0.2, 0.5, 1.0, -0.3])
            ctrl = np.array([0.7, -1.5])
        else:
            physics = physics_of(FOOT_XML, substeps=2, kappa=300.0)
            axis = np.array([0.3, -0.5, 0.1])
            angle = 0.02
            quat = np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis / np.linalg.norm(axis)])
            qpos = np.concatenate([[0.0, 0.0, 0.03 - 0.004], quat])  # spheres 1.5 - 6.5 mm deep
            qvel = np.array([0.8, 0.3, -0.1, 0.2, -0.3, 0.4])
            ctrl = np.array([3.0, 0.2])
        model = physics.mj_model
        nv = model.nv

        def f(x):
            dq, v, u = x[:nv], x[nv : 2 * nv], x[2 * nv :]
            d = physics.make_data(tangent.integrate_pos(model, jnp.asarray(qpos), dq), v)
            d = physics.control_step(d, u)
            return jnp.concatenate([d.qpos, d.qvel])

        x0 = np.concatenate([np.zeros(nv), qvel, ctrl])
        f = jax.jit(f)
        jac = np.asarray(jax.jit(jax.jacfwd(f))(jnp.asarray(x0)))
        assert jac.dtype == np.float64
        eps = 1e-6
        fd = np.stack(
            [(np.asarray(f(x0 + eps * e)) - np.asarray(f(x0 - eps * e))) / (2 * eps) for e in np.eye(x0.size)], 1
        )
        contact = physics.make_data(jnp.asarray(qpos), jnp.asarray(qvel))._impl.contact
        assert int(np.sum(np.asarray(contact.dist) < 0)) == (1 if xml == "ball" else 4)  # all contacts penetrating
    assert np.isfinite(jac).all()
    np.testing.assert_allclose(jac, fd, atol=1e-6 * max(1.0, np.abs(fd).max()), rtol=1e-5)
    assert np.abs(jac[:, 2 * nv :]).max() > 0  # B is not trivially zero


# ----- tasks ------------------------------------------------------------------------
def _steps_finitely(env, n=8):
    """Random actions for ``n`` steps: finite, never diverged; the largest event force (N)."""
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step = jax.jit(env.plain_step)
    rng = np.random.default_rng(0)
    largest = 0.0
    for _ in range(n):
        state = step(state, jnp.asarray(rng.uniform(-1, 1, env.action_size), jnp.float32))
        assert np.isfinite(np.asarray(state.obs)).all()
        assert not bool(state.info["sim_diverged"])
        largest = max(largest, float(state.info["max_contact_force"]))
    return largest


@pytest.mark.integration
@pytest.mark.parametrize("env_id", ["BoxPush-v0", "PlanarHand-v0"])
def test_small_tasks_make_and_step_under_moreau(env_id):
    env = bcg_envs.make_jax(env_id, contact_model="moreau", kappa=300.0)
    assert env.contact_model == "moreau" and env.physics.moreau.kappa == 300.0 and env.physics.penalty is None
    assert env.mj_model.opt.timestep == pytest.approx(0.004)  # the task's own physics step
    assert np.all(env.mj_model.geom_margin < -1.0)  # MuJoCo's contact rows never activate
    largest = _steps_finitely(env, 40)
    if env_id == "PlanarHand-v0":
        # the fingers touch the disc in 23 of the 40 steps (at most 10 N); with their step
        # size alone (step_cap=False) the prox iterations blow up and the run diverges
        assert 0 < largest < 50


G1_IDS = [i.split("/")[1] for i in bcg_envs.list_envs() if i.split("/")[1].startswith("G1")]


def test_every_registered_id_is_covered():
    assert set(bcg_envs.list_envs()) == {f"bcg_envs/{i}" for i in ["BoxPush-v0", "PlanarHand-v0", *G1_IDS]}


@pytest.mark.long
@pytest.mark.parametrize("env_id", G1_IDS)
def test_g1_tasks_make_and_step_under_moreau_at_5_ms(env_id):
    env = bcg_envs.make_jax(env_id, contact_model="moreau", kappa=300.0)
    assert env.mj_model.opt.timestep == pytest.approx(0.005) and env.physics.n_substeps == 4
    assert env.dt == pytest.approx(0.02)
    _steps_finitely(env)


@pytest.mark.long
def test_g1_stands_on_the_moreau_floor():
    """The G1 stand keyframe held by its PD servos for 1 s at kappa 300, 4 x 5 ms per step:
    the pelvis stays within 3 cm of the keyframe height and upright, the feet carry the
    robot, it does not gain energy (kinetic energy stays below 1 J).

    Penetration is not a few mm: the model has no position correction, and each substep
    a fraction ``1 - sigmoid(kappa d)`` of the stopping impulse is missing, so a resting
    contact keeps sinking, at a rate that falls off like ``exp(-kappa d)``. Measured: the
    foot spheres (5 mm radius) are 6 mm into the floor after 0.2 s and 13 mm after 1 s
    (the pelvis 1.8 cm lower; 12 mm with 50 prox iterations instead of 10); held on, the
    open-loop pose tips over at about 1.7 s (on MuJoCo's contact it sways 7 cm forward
    and back and stays up)."""
    from bcg_envs.envs.g1 import constants as C
    from bcg_envs.physics.simulator import refresh

    model = mujoco.MjModel.from_xml_path(str(C.G1_XML))
    model.opt.timestep = 0.005
    disable_constraint_contacts(model)
    physics = Physics(model, 4, moreau=MoreauContact(kappa=300.0))
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key(C.STAND_KEYFRAME).id)
    ctrl = jnp.asarray(C.DEFAULT_POSE, jnp.float32)
    feet = np.array([model.geom(g).id for g in C.FOOT_GEOMS])
    radius = jnp.asarray(model.geom_size[feet, 0], jnp.float32)

    @jax.jit
    def stand(d):
        def body(d, _):
            d = physics.control_step(d, ctrl)
            depth = jnp.max(radius - refresh(physics, d).geom_xpos[feet, 2])
            return d, (d.qpos, d.qvel, depth, jnp.sum(physics.contact_normal_forces(d)))

        return jax.lax.scan(body, d, None, length=50)

    d0 = physics.make_data(jnp.asarray(data.qpos, jnp.float32), jnp.zeros(model.nv, jnp.float32))
    _, (qpos, qvel, depths, forces) = jax.tree.map(np.asarray, stand(d0))
    assert np.isfinite(qpos).all() and np.isfinite(qvel).all()
    assert np.abs(qpos[:, 2] - C.DEFAULT_ROOT_HEIGHT).max() < 0.03
    assert depths.max() < 0.025  # see the docstring: not a few mm
    mj, M, kinetic = mujoco.MjData(model), np.zeros((model.nv, model.nv)), []
    for q, v in zip(qpos.astype(np.float64), qvel.astype(np.float64)):
        mj.qpos[:] = q
        mujoco.mj_forward(model, mj)
        mujoco.mj_fullM(model, mj, M)
        kinetic.append(0.5 * v @ M @ v)
    assert max(kinetic[5:]) < 1.0  # J: no energy gained (the landing settles in 0.1 s)
    up = np.zeros(9)
    mujoco.mju_quat2Mat(up, qpos[-1, 3:7].astype(np.float64))
    assert up[8] > 0.98
    weight = float(np.sum(model.body_mass)) * G
    assert np.mean(forces[10:]) == pytest.approx(weight, rel=0.05)


# ----- the bundle trigger reads the model's forces ----------------------------------
TOY_BALL_XML = (
    BALL_XML.replace(f'mass="{MASS}"', 'mass="1.0"').replace("<actuator>", "<!--").replace("</actuator>", "-->")
)


@pytest.mark.integration  # ~55 s: compiles a bcg step
def test_bcg_trigger_reads_the_moreau_normal_force_of_a_resting_ball(make_toy_env):
    """A 1 kg ball resting on the floor for 1 s: ``info["max_contact_force"]`` (the event
    force the bundle trigger reads, from ``efc_force``) carries its weight, so the trigger
    fires at a 5 N threshold. The ball sinks slowly: the model has no position correction,
    and at depth d a fraction ``1 - sigmoid(kappa d)`` of the stopping impulse is missing
    each substep."""
    env = make_toy_env(
        TOY_BALL_XML,
        ctrl_dt=0.02,
        force_threshold=5.0,
        initial_state=lambda key: (jnp.array([0.0, 0.0, RADIUS - 0.004, 1.0, 0.0, 0.0, 0.0]), jnp.zeros(6)),
        contact_model="moreau",
        kappa=300.0,
    )
    state = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.plain_step)
    forces, depths, bundled = [], [], []
    for _ in range(50):
        state = step(state, jnp.zeros(0))
        forces.append(float(state.info["max_contact_force"]))
        depths.append(RADIUS - float(state.data.qpos[2]))
        bundled.append(bool(state.info["bundled"]))
    assert np.mean(forces[10:]) == pytest.approx(9.81, rel=0.05)
    assert all(bundled[10:])
    assert np.all(np.diff(depths[10:]) > 0) and depths[-1] < 0.015  # sinking, slowly
    assert np.abs(np.asarray(state.data.qvel)).max() < 0.02


# ----- bad input ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(contact_model="moreau", kappa=0.0), "kappa"),
        (dict(contact_model="moreau", kappa=-300.0), "kappa"),
        (dict(contact_model="moreau", kappa=float("inf")), "kappa"),
        (dict(contact_model="moreau", contact_stiffness="stiff"), "kappa"),
        (dict(contact_model="moreau", contact_options={"prox_iterations": -1}), "prox_iterations"),
        (dict(contact_model="moreau", contact_options={"contact_margin": float("nan")}), "contact_margin"),
        (dict(contact_model="moreau", contact_options={"baumgarte": 0.2}), "unknown contact_options"),
        (dict(contact_model="moreau", contact_options={"friction": "smooth"}), "friction.*cone.*regularized"),
        (dict(contact_model="moreau", contact_options={"friction": True}), "friction"),
        (dict(contact_options={"prox_iterations": 5}), "contact_options"),
        (dict(kappa=300.0), "contact_model='moreau'"),
    ],
)
def test_bad_moreau_options_raise_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bcg_envs.make_jax("BoxPush-v0", **kwargs)


def test_moreau_is_mjx_only():
    with pytest.raises(ValueError, match="MJX backend only"):
        gym.make("bcg_envs/BoxPush-v0", backend="mujoco", contact_model="moreau")


def test_contact_options_and_with_contact_stiffness():
    env = bcg_envs.make_jax(
        "BoxPush-v0",
        contact_model="moreau",
        kappa=100.0,
        contact_options={"prox_iterations": 4, "contact_margin": 0.001, "step_cap": False},
    )
    params = env.physics.moreau
    assert (params.kappa, params.prox_iterations, params.contact_margin, params.step_cap) == (100.0, 4, 0.001, False)
    assert env.with_contact_stiffness(50.0).physics.moreau.kappa == 50.0 and env.physics.moreau.kappa == 100.0
    with pytest.raises(ValueError, match="kappa"):
        env.with_contact_stiffness(-1.0)
