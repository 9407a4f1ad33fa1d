"""backend="mujoco": MuJoCo C physics with the task's shared JAX logic (issue 7).

Cross-backend checks drive the MJX backend through ``GymEnv`` (so its compiled step and
grad_step come from the same persistent-cache entries as the tests under tests/envs) and
move the C env to MJX's state with ``set_state`` (cheap in C), never the other way round:
``GymEnv.set_state`` runs ``state_from`` eagerly, seconds per call.
"""

import importlib

import gymnasium as gym
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

import bcg_envs  # noqa: F401  (registers the ids)
from bcg_envs.gym import GradStepResult
from bcg_envs.mujoco_backend import MujocoGymEnv, MujocoVectorEnv

ENV_ID = "bcg_envs/BoxPush-v0"
BOOKKEEPING = {"step", "bundle_window", "bundled", "sim_diverged", "truncated", "max_contact_force",
               "bundle_dropped", "bundle_alpha", "is_success"}


def _optional(name: str, module: str):
    try:
        importlib.import_module(module)
    except Exception as err:  # noqa: BLE001 - any import failure means "not available yet"
        return pytest.param(name, marks=pytest.mark.skip(reason=f"{module} cannot be imported: {err!r}"))
    return name


TASKS = [
    "BoxPush-v0",
    _optional("PlanarHand-v0", "bcg_envs.envs.planar_hand.hand"),
    _optional("G1Squat-v0", "bcg_envs.envs.g1.tracking"),
]


@pytest.fixture(scope="module")
def env():
    e = gym.make(ENV_ID, backend="mujoco")
    e.reset(seed=0)
    yield e
    e.close()


def _smooth_action(t: int, nu: int, amp: float = 0.5) -> np.ndarray:
    k = np.arange(nu)
    return (amp * np.sin(0.15 * t + 1.3 * k) * np.cos(0.05 * t + 0.4 * k)).astype(np.float32)


def _task_info(info):
    return {k: np.asarray(v) for k, v in info.items() if k not in BOOKKEEPING and not k.startswith("reward/")}


class _Mjx:
    """A jitted ``state_from`` of the MJX backend (``GymEnv.set_state`` runs it eagerly,
    seconds per call)."""

    def __init__(self, jax_env):
        self.env = jax_env
        self.state_from = jax.jit(lambda q, v, info, key: jax_env.state_from(q, v, None, info, key))

    def state(self, qpos, qvel, info):
        return self.state_from(jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32),
                               {k: jnp.asarray(v) for k, v in info.items()}, jax.random.PRNGKey(0))


# ----- the task program reads exactly what mjx.put_data would give -----------------------------
@pytest.mark.parametrize("name", TASKS)
def test_task_leaves_match_put_data(name):
    """The packed leaves (public fields, contacts and constraint rows reordered into MJX's
    slots) equal ``mjx.put_data``'s, at states with contacts."""
    e = MujocoGymEnv(name)
    e.reset(seed=1)
    program = e.unwrapped._shared.program
    assert not program.slow, program.slow  # every leaf the task reads has a fast copy
    rng = np.random.default_rng(0)
    contacts = 0
    for t in range(60):
        e.step(rng.uniform(-1, 1, e.action_space.shape).astype(np.float32))
        d = e.unwrapped.data
        contacts += d.ncon > 0
        if t % 15:
            continue
        ours = program.read(d)
        ref = jax.tree_util.tree_leaves(mjx.put_data(e.unwrapped.model, d))
        for i, value in ours.items():
            np.testing.assert_allclose(value, np.asarray(ref[i], np.float64), rtol=1e-6, atol=1e-6,
                                       err_msg=program.leaves[i].path)
    e.close()


# ----- cross-backend agreement ----------------------------------------------------------------
def _regime(model, qpos, qvel, ctrl, n_substeps):
    """Per substep (MuJoCo C): the contacting geom pairs, and each dry-friction joint's
    direction while it slides (0 while it sticks): what switches when a contact opens or
    closes or a joint starts, stops or reverses."""
    d = mujoco.MjData(model)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    pattern = []
    for _ in range(n_substeps):
        mujoco.mj_step(model, d)
        n = d.nefc
        friction = d.efc_type[:n] == mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF
        force = d.efc_force[:n][friction]
        sliding = np.abs(force) >= 0.999 * d.efc_frictionloss[:n][friction]
        pattern.append((tuple(sorted(map(tuple, d.contact.geom[: d.ncon]))), tuple(np.sign(force) * sliding)))
    return pattern


#: Smooth-action amplitude per task (G1 holds its default pose: with any PD offset one of its
#: 29 dry-friction joints switches stick/slip in nearly every step).
AMPLITUDE = {"BoxPush-v0": 1.0, "PlanarHand-v0": 1.0, "G1Squat-v0": 0.0}
#: Per-step tolerance (absolute and relative) on observations and reward: float32 MJX vs
#: float64 C over one control step (and MJX's warmstart vs C's cold start after
#: set_state). Measured worst: BoxPush 6e-6, PlanarHand 4e-4 (finger velocities in
#: contact), G1 7e-3 (joint velocities: stiff PD servos on 8 stiff foot contacts amplify
#: the rounding).
STEP_TOL = {"BoxPush-v0": 1e-3, "PlanarHand-v0": 1e-3, "G1Squat-v0": 2e-2}


@pytest.mark.parametrize("name", TASKS)
def test_per_step_agreement_with_mjx(name):
    """Both backends reset with the same seed (same state and task info); before every
    step of a 100-step smooth-action run the C env is set to the MJX env's (float32)
    state, so each step starts from the same state. Where no constraint switches regime
    within the step (contact on/off, dry-friction stick/slip: the dynamics jump there, and
    MJX and C resolve slow dry-friction sliding differently: C's box yaw chatters where
    MJX sticks), one control step agrees to ``STEP_TOL`` on every observation and the
    reward, contact steps included; so do the contact forces (1e-2 relative)."""
    c = gym.make(f"bcg_envs/{name}", backend="mujoco")
    m = gym.make(f"bcg_envs/{name}")  # the MJX env (its jitted step is shared with tests/envs)
    u = c.unwrapped
    model, n_sub = u.model, u.jax_env.physics.n_substeps
    oc, _ = c.reset(seed=3)
    om, _ = m.reset(seed=3)
    np.testing.assert_allclose(oc, om, atol=1e-6)
    nu = c.action_space.shape[0]
    worst, worst_force, checked, contact_steps = 0.0, 0.0, 0, 0
    for t in range(100):
        qpos, qvel, _ = m.unwrapped.get_state()
        u.set_state(qpos, qvel)
        a = _smooth_action(t, nu, amp=AMPLITUDE[name])
        if name == "BoxPush-v0":  # steer the pusher at the box, so that many steps are in contact
            a = np.clip(0.5 * a + 0.6 * om[13:15] / (np.linalg.norm(om[13:15]) + 1e-6), -1, 1).astype(np.float32)
        ctrl = u._shared.action_map(u._shared.physics_action(np.clip(a, -1, 1), u._core.info))
        pattern = _regime(model, qpos, qvel, ctrl, n_sub)
        obs, reward, term, trunc, info = c.step(a)
        om, rm, tm, _, im = m.step(a)
        if term or tm:
            break
        if len(set(pattern)) > 1:
            continue  # a regime switch inside the step
        worst_force = max(worst_force, abs(info["max_contact_force"] - im["max_contact_force"]) / max(im["max_contact_force"], 1.0))
        worst = max(worst, float(np.max(np.abs(obs - om))))
        tol = STEP_TOL[name]
        np.testing.assert_allclose(obs, om, atol=tol, rtol=tol, err_msg=f"step {t}")
        assert reward == pytest.approx(rm, abs=tol, rel=tol), t
        checked += 1
        contact_steps += bool(pattern[0][0])
    print(f"{name}: {checked} steps checked ({contact_steps} in contact), worst obs difference {worst:.2e}, "
          f"worst relative max_contact_force difference {worst_force:.2e}")
    # G1 starts at a random clip frame and replays the reference open loop (action 0),
    # which the tracking-error limit can end after ~30 steps.
    assert checked >= (20 if name.startswith("G1") else 30) and contact_steps > 0 and worst_force < 1e-2
    c.close()
    m.close()


def test_trajectory_agreement_with_mjx():
    """100 steps from the same reset (same seed: same state and goal), both backends fed
    the same smooth action sequence (a proportional pursuit of the box, computed from the C
    observation, so the pusher strikes and pushes it). Float32 MJX and float64 C drift
    apart through the stiff contact and C's dry-friction chatter (see the per-step test):
    positions stay within 1 cm and observations within 0.1 over the 4 s."""
    c = gym.make(ENV_ID, backend="mujoco")
    m = gym.make(ENV_ID)
    oc, _ = c.reset(seed=7)
    om, _ = m.reset(seed=7)
    np.testing.assert_array_equal(oc, om)
    forces, worst, worst_q = [], 0.0, 0.0
    for t in range(100):
        a = np.clip(6.0 * oc[13:15], -0.8, 0.8).astype(np.float32)
        oc, rc, tc, _, ic = c.step(a)
        om, rm, tm, _, im = m.step(a)
        forces.append(ic["max_contact_force"])
        worst = max(worst, float(np.max(np.abs(oc - om))))
        worst_q = max(worst_q, float(np.max(np.abs(c.unwrapped.get_state()[0] - m.unwrapped.get_state()[0]))))
        assert tc == tm
        if tc:
            break
    print(f"trajectory: worst obs difference {worst:.2e}, worst qpos difference {worst_q:.2e}, "
          f"{sum(f > 0 for f in forces)} steps in contact, max force {max(forces):.1f} N")
    assert worst_q < 1e-2 and worst < 0.1
    assert sum(f > 0 for f in forces) >= 5  # the run exercises contact
    c.close()
    m.close()


def _free_and_contact_states(rng, n):
    """BoxPush states with the pusher well clear of the box, and pressing a box face
    while the box slides and spins (its dry friction stays in the slip regime)."""
    out = []
    for contact in (False, True):
        for _ in range(n):
            box = rng.uniform(-0.1, 0.1, 2)
            yaw = rng.uniform(-0.3, 0.3)
            normal = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]][rng.integers(4)], float)
            rot = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
            n_world = rot @ normal
            gap = -0.002 if contact else 0.08
            pusher = box + n_world * (0.075 + gap)
            qvel = np.zeros(5)
            qvel[2:4] = rng.choice([-1.0, 1.0], 2) * rng.uniform(0.2, 0.35, 2)
            qvel[4] = rng.choice([-1.0, 1.0]) * rng.uniform(1.5, 2.5)
            if contact:
                qvel[:2] = qvel[2:4] - 0.1 * n_world
                action = np.clip(-n_world * 0.8, -1, 1)
            else:
                action = rng.uniform(-0.3, 0.3, 2)
            qpos = np.concatenate([pusher, box, [yaw]])
            out.append((contact, qpos.astype(np.float32), qvel.astype(np.float32), action.astype(np.float32)))
    return out


def test_exact_jacobians_match_mjx(env):
    """Exact Jacobians (C central differences vs MJX forward mode) agree away from contact
    switches, free and in contact: A, B, r_x, r_a, C to 1e-4 relative (MJX is float32;
    measured ~1e-6). MJX runs ``GymEnv.grad_step`` (its jit is shared with the BoxPush
    suite's compile cache); its state is set through the jitted functional API."""
    u = env.unwrapped
    g = gym.make(ENV_ID).unwrapped
    g.reset(seed=0)
    ref = _Mjx(u.jax_env)
    task = _task_info(u._core.info)
    checked = {False: 0, True: 0}
    for contact, qpos, qvel, action in _free_and_contact_states(np.random.default_rng(0), 4):
        u.set_state(qpos, qvel)
        out = u.grad_step(action, estimator="exact")
        g._state = ref.state(qpos, qvel, task)
        mj = g.grad_step(action, estimator="exact")
        s, jac = mj, mj.jacobians
        if np.max(np.abs(out.observation - s.observation)) > 1e-4:
            continue  # the backends took different contact regimes: not the same step
        if contact != (out.info["max_contact_force"] > 0):
            continue
        for field in ("A", "B", "r_x", "r_a", "C"):
            ours, theirs = getattr(out.jacobians, field), np.asarray(getattr(jac, field))
            err = np.linalg.norm(ours - theirs) / max(np.linalg.norm(theirs), 1e-6)
            assert err < 1e-4, (field, contact, err)
        checked[contact] += 1
    assert checked[False] >= 3 and checked[True] >= 3, checked


# ----- Gymnasium / SB3 contract ---------------------------------------------------------------
def test_make_returns_mujoco_backend():
    e = gym.make(ENV_ID, backend="mujoco")
    assert isinstance(e.unwrapped, MujocoGymEnv)
    assert isinstance(e.unwrapped.model, mujoco.MjModel)
    e.close()


def test_gymnasium_check_env(no_space_warnings):
    from gymnasium.utils.env_checker import check_env

    e = gym.make(ENV_ID, backend="mujoco", render_mode="rgb_array", width=64, height=48)
    with no_space_warnings():
        check_env(e.unwrapped)
    e.reset(seed=0)
    img = e.render()
    assert img.shape == (48, 64, 3) and img.dtype == np.uint8 and img.std() > 1.0
    e.close()


def test_sb3_check_env(no_space_warnings):
    from stable_baselines3.common.env_checker import check_env

    e = gym.make(ENV_ID, backend="mujoco")
    with no_space_warnings():
        check_env(e)
    e.close()


def test_bad_inputs():
    e = MujocoGymEnv("BoxPush-v0")
    with pytest.raises(RuntimeError, match="reset"):
        e.step(np.zeros(2, np.float32))
    with pytest.raises(RuntimeError, match="reset"):
        e.grad_step(np.zeros(2, np.float32))
    with pytest.raises(RuntimeError, match="reset"):
        e.get_state()
    e.reset(seed=0)
    for bad in (np.zeros(3, np.float32), np.zeros((1, 2), np.float32), np.array(["a", "b"]),
                np.array([np.nan, 0.0], np.float32), np.array([True, False])):
        with pytest.raises(ValueError):
            e.step(bad)
        with pytest.raises(ValueError):
            e.grad_step(bad)
    with pytest.raises(ValueError, match="estimator"):
        e.grad_step(np.zeros(2, np.float32), estimator="nope")
    with pytest.raises(ValueError, match="bundle"):
        e.grad_step(np.zeros(2, np.float32), bundle={"num_samples": 3})
    with pytest.raises(ValueError, match="qpos"):
        e.set_state(np.zeros(4), np.zeros(5))
    with pytest.raises(ValueError, match="render_mode"):
        MujocoGymEnv("BoxPush-v0", render_mode="human")
    with pytest.raises(ValueError, match="unknown env id"):
        MujocoGymEnv("Nope-v0")
    e.close()


def test_step_info_truncation_and_state_round_trip():
    e = gym.make(ENV_ID, backend="mujoco", config={"episode_length": 5})
    m = gym.make(ENV_ID)
    _, info_c = e.reset(seed=0)
    _, info_m = m.reset(seed=0)
    assert set(info_c) == set(info_m)
    _, _, _, _, info_m = m.step(np.zeros(2, np.float32))
    for t in range(5):
        _, r, term, trunc, info_c = e.step(np.zeros(2, np.float32))
        assert set(info_c) == set(info_m)
        assert info_c["step"] == t + 1 and trunc == (t == 4) and not term
    for k, v in info_c.items():
        assert np.asarray(v).dtype.kind == np.asarray(info_m[k]).dtype.kind, k
    u = e.unwrapped
    qpos, qvel = np.array([0.2, -0.1, 0.0, 0.05, 0.3]), np.array([0.1, 0.0, -0.2, 0.0, 0.5])
    u.set_state(qpos, qvel)
    q, v, act = u.get_state()
    np.testing.assert_array_equal(q, qpos)
    np.testing.assert_array_equal(v, qvel)
    assert act.shape == (0,) and u.get_state()[0] is not u.data.qpos  # copies
    e.close()
    m.close()


@pytest.mark.parametrize("qvel_scale", [2e3, 1e11], ids=["fast", "huge"])
def test_divergence_reverts_the_step(qvel_scale):
    """|qvel| >= 1e3 after the step (fast) or a state MuJoCo itself rejects and resets
    (huge): the step is reverted, terminated, flagged, with a finite observation."""
    e = MujocoGymEnv("BoxPush-v0")
    e.reset(seed=0)
    # The box (no joint limit, light damping) thrown away from the pusher.
    qpos, qvel = np.array([-0.3, -0.3, 0.2, 0.2, 0.0]), np.array([0.0, 0.0, qvel_scale, 0.0, 0.0])
    e.set_state(qpos, qvel)
    for fn in (e.step, lambda a: e.grad_step(a, estimator="exact")):
        e.set_state(qpos, qvel)
        out = fn(np.zeros(2, np.float32))
        obs, reward, term, trunc, info = out[:5]
        assert info["sim_diverged"] and term and reward == 0.0 and info["is_success"] is False
        assert np.isfinite(obs).all()
        np.testing.assert_array_equal(e.get_state()[0], qpos)  # reverted
        if isinstance(out, GradStepResult):
            assert all(np.all(j == 0) for j in out.jacobians)
    e.close()


# ----- estimators -----------------------------------------------------------------------------
def _pressing_state():
    # Pusher driven hard into the box's -x face (as in tests/envs/box_push).
    return np.array([-0.078, 0.0, 0.0, 0.0, 0.0]), np.array([0.6, 0.0, 0.0, 0.0, 0.0]), np.array([1.0, 0.0], np.float32)


def test_bcg_is_exact_without_pressing_contact_and_bundles_when_pressing(env):
    u = env.unwrapped
    threshold = u.jax_env.bundle.force_threshold
    qpos, qvel = np.array([-0.3, -0.3, 0.2, 0.2, 0.0]), np.zeros(5)
    action = np.array([0.2, 0.1], np.float32)
    u.set_state(qpos, qvel)
    bcg = u.grad_step(action, estimator="bcg")
    u.set_state(qpos, qvel)
    exact = u.grad_step(action, estimator="exact")
    assert not bcg.info["bundled"] and bcg.info["max_contact_force"] <= threshold
    np.testing.assert_array_equal(bcg.jacobians.A, exact.jacobians.A)
    np.testing.assert_array_equal(bcg.jacobians.B, exact.jacobians.B)

    qpos, qvel, action = _pressing_state()
    for space in ("cartesian", "joint"):
        u.set_state(qpos, qvel)
        bcg = u.grad_step(action, estimator="bcg", bundle=bcg_envs.BundleConfig(space=space))
        u.set_state(qpos, qvel)
        exact = u.grad_step(action, estimator="exact")
        assert bcg.info["bundled"] and bcg.info["max_contact_force"] > threshold
        assert bcg.info["bundle_dropped"] == 0
        assert not np.allclose(bcg.jacobians.A, exact.jacobians.A, rtol=1e-3)
        assert np.isfinite(bcg.jacobians.A).all() and np.isfinite(bcg.jacobians.B).all()


@pytest.mark.parametrize("estimator", ["bundle", "zeroth", "alpha"])
def test_global_estimators(env, estimator):
    u = env.unwrapped
    qpos, qvel, action = _pressing_state()
    u.set_state(qpos, qvel)
    out = u.grad_step(action, estimator=estimator, bundle=bcg_envs.BundleConfig(action_sigma=0.05))
    assert out.info["bundled"] and out.info["bundle_dropped"] == 0
    alpha = out.info["bundle_alpha"]
    assert {"bundle": alpha == 1.0, "zeroth": alpha == 0.0, "alpha": 0.0 <= alpha <= 1.0}[estimator]
    for j in out.jacobians:
        assert np.isfinite(j).all()
    assert out.jacobians.A.shape == (10, 10) and out.jacobians.B.shape == (10, 2)
    assert out.jacobians.C.shape == (17, 10)


def test_grad_step_advances_like_step(env):
    u = env.unwrapped
    env.reset(seed=5)
    qpos, qvel, _ = u.get_state()
    action = np.array([0.4, -0.7], np.float32)
    obs_step, r_step, *_ = env.step(action)
    for estimator in ("exact", "bcg", "bundle"):
        u.set_state(qpos, qvel)
        out = u.grad_step(action, estimator=estimator)
        np.testing.assert_array_equal(out.observation, obs_step)
        assert out.reward == r_step


# ----- vector env -----------------------------------------------------------------------------
def test_vector_env_step_grad_step_and_autoreset():
    n = 3
    v = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point", backend="mujoco",
                     config={"episode_length": 4})
    assert isinstance(v, MujocoVectorEnv)
    obs, info = v.reset(seed=0)
    assert obs.shape == (n, 17) and obs.dtype == np.float32 and info["step"].dtype == np.int32
    rng = np.random.default_rng(0)
    for t in range(4):
        obs, rew, term, trunc, info = v.step(rng.uniform(-1, 1, (n, 2)).astype(np.float32))
        assert obs.shape == (n, 17) and rew.shape == (n,) and rew.dtype == np.float32
    assert trunc.all() and info["_final_obs"].all()
    assert (info["step"] == 4).all()
    assert info["is_success"].dtype == bool and info["is_success"].shape == (n,)
    assert not np.allclose(info["final_obs"], obs)  # obs is the new episodes' first
    out = v.grad_step(rng.uniform(-1, 1, (n, 2)).astype(np.float32), estimator="bcg")
    assert out.jacobians.A.shape == (n, 10, 10) and out.jacobians.B.shape == (n, 10, 2)
    assert out.jacobians.r_x.shape == (n, 10) and out.jacobians.r_a.shape == (n, 2)
    assert out.jacobians.C.shape == (n, 17, 10)
    assert out.observation.shape == (n, 17) and out.info["bundle_dropped"].shape == (n,)
    with pytest.raises(ValueError):
        v.step(np.zeros((n + 1, 2), np.float32))
    v.close()


def test_vector_env_matches_single_env():
    """Rollout-based batch stepping tracks the single env's mj_step loop. Not bit for bit:
    the replay that recovers contact forces skips contact-free substeps, so the warmstart
    it hands the next rollout differs from mj_step's within the (4-iteration) solver's
    convergence, which moves BoxPush's velocities by ~1e-5 (measured 5e-5 at most)."""
    v = MujocoVectorEnv("BoxPush-v0", 2)
    v.reset(seed=0)
    s = MujocoGymEnv("BoxPush-v0")
    s.reset(seed=0)
    qpos, qvel = np.array([-0.12, 0.0, 0.0, 0.0, 0.0]), np.array([0.8, 0.0, 0.0, 0.0, 0.0])
    for core in v._cores:
        core.load(qpos, qvel, None, dict(s._core.info))
    s.set_state(qpos, qvel)
    forces = []
    for t in range(40):
        a = _smooth_action(t, 2, amp=0.9)
        o1, r1, _, _, i1 = s.step(a)
        o2, r2, _, _, i2 = v.step(np.stack([a, a]))
        np.testing.assert_array_equal(o2[0], o2[1])
        np.testing.assert_allclose(o2[0], o1, atol=5e-4)
        np.testing.assert_allclose(i2["max_contact_force"], i1["max_contact_force"], rtol=1e-3, atol=1e-3)
        forces.append(i1["max_contact_force"])
    assert max(forces) > 0
    v.close()
    s.close()


# ----- success ------------------------------------------------------------------------------
def _success_cases(name, task):
    """(qpos, qvel, action, expected is_success) around the episode's goal."""
    if name == "BoxPush-v0":
        goal, goal_yaw = np.asarray(task["goal"], float), float(task["goal_yaw"])
        side = -0.15 if goal[0] > 0 else 0.15  # the pusher parked clear of the box
        out = []
        for (dx, dyaw), expected in (((0.0, 0.0), True), ((0.012, 0.15), True), ((0.03, 0.0), False), ((0.0, 0.3), False)):
            box = goal + [dx, 0.0]
            out.append((np.array([box[0] + side, box[1], box[0], box[1], goal_yaw + dyaw]), np.zeros(5), np.zeros(2), expected))
        return out
    from bcg_envs.envs.planar_hand.hand import OPEN_POSE

    goal_yaw = float(task["goal_yaw"])
    return [(np.array([*OPEN_POSE, 0.0, 0.0, goal_yaw + dyaw]), np.zeros(7), -np.ones(4), expected)
            for dyaw, expected in ((0.0, True), (0.06, True), (0.2, False), (-0.2, False))]


@pytest.mark.parametrize("name", TASKS[:2])
def test_is_success_agrees_between_backends(name):
    """Hand-built states at and off the goal: both backends report the same
    ``info["is_success"]`` (a bool), which the JAX ``State`` also holds in ``metrics``."""
    c = gym.make(f"bcg_envs/{name}", backend="mujoco").unwrapped
    m = gym.make(f"bcg_envs/{name}").unwrapped  # the MJX env (its jitted step is shared with tests/envs)
    _, info = c.reset(seed=1)
    assert info["is_success"] is False
    m.reset(seed=1)
    ref = _Mjx(m.jax_env)
    task = _task_info(c._core.info)
    for qpos, qvel, action, expected in _success_cases(name, task):
        c.set_state(qpos, qvel)
        m._state = ref.state(qpos, qvel, task)
        *_, ic = c.step(action.astype(np.float32))
        *_, im = m.step(action.astype(np.float32))
        assert ic["is_success"] is expected and im["is_success"] is expected, (qpos, ic["is_success"], im["is_success"])
        assert m._state.info["is_success"].dtype == bool
        assert float(m._state.metrics["is_success"]) == float(expected)
    c.close()
    m.close()


def test_zeroth_order_sample_count_below_nx_plus_nu_is_refused(env):
    """The C backend resolves and checks BundleConfig.num_samples like the MJX one."""
    env.reset(seed=0)
    with pytest.raises(ValueError, match="BundleConfig.num_samples must be >= nx \\+ nu = 12"):
        env.unwrapped.grad_step(np.zeros(2, np.float32), estimator="zeroth", bundle=bcg_envs.BundleConfig(num_samples=6))
    out = env.unwrapped.grad_step(
        np.zeros(2, np.float32), estimator="zeroth", bundle=bcg_envs.BundleConfig(num_samples=6, allow_underdetermined=True)
    )
    assert np.isfinite(out.jacobians.A).all()
