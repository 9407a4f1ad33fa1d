"""bcg_envs/mujoco_backend/jacobians.py: exact Jacobians against MJX's and against MuJoCo's
own per-substep derivatives (mjd_transitionFD), bcg's bundle against those derivatives at
its branches, the global (bundle, zeroth, alpha) estimators, the zeroth-order sample-count
check, and that grad_step advances the env like step."""

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import bcg_envs
from tests.mujoco_backend.conftest import ENV_ID, JittedMjxStates, task_info_of


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


@pytest.mark.integration
def test_exact_jacobians_match_mjx(env):
    """Exact Jacobians (C central differences vs MJX forward mode) agree away from contact
    switches, free and in contact: A, B, r_x, r_a, C to 1e-4 relative (MJX is float32;
    measured ~1e-6). MJX runs ``GymEnv.grad_step`` (its jit is shared with the BoxPush
    suite's compile cache); its state is set through the jitted functional API."""
    u = env.unwrapped
    g = gym.make(ENV_ID).unwrapped
    g.reset(seed=0)
    ref = JittedMjxStates(u.jax_env)
    task = task_info_of(u.simulation.core.info)
    checked = {False: 0, True: 0}
    for contact, qpos, qvel, action in _free_and_contact_states(np.random.default_rng(0), 4):
        u.set_state(qpos, qvel)
        out = u.grad_step(action, estimator="exact")
        g.simulation.state = ref.state(qpos, qvel, task)
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
    for space, trigger in (("cartesian", "force"), ("joint", "force"), ("cartesian", "point")):
        u.set_state(qpos, qvel)
        bcg = u.grad_step(action, estimator="bcg", bundle=bcg_envs.BundleConfig(space=space, trigger=trigger))
        u.set_state(qpos, qvel)
        exact = u.grad_step(action, estimator="exact")
        assert bcg.info["bundled"] and bcg.info["max_contact_force"] > threshold
        # the pusher touches the box at one point: that contact is the event
        assert bcg.info["max_point_force"] == bcg.info["max_contact_force"]
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


@pytest.mark.parametrize("estimator", ["bundle", "zeroth"])
def test_global_estimators_equal_exact_where_the_step_is_affine(env, estimator):
    """A contact-free state where BoxPush's step is affine (the box slides and spins with
    every joint's dry friction in slip, the pusher 25 cm away; as in
    ``tests/gradients/test_estimators.py``): the mean of the branches' Jacobians
    (``bundle``) and the least-squares fit of their outcomes (``zeroth``, rescaled by the
    sampling sigmas) both equal the exact Jacobians there, so a wrong scale or mask fails."""
    u = env.unwrapped
    qpos, qvel = np.array([-0.25, 0.2, 0.0, 0.0, 0.1]), np.array([0.0, 0.0, 0.3, 0.25, 2.0])
    action = np.array([0.5, 0.0], np.float32)
    u.set_state(qpos, qvel)
    exact = u.grad_step(action, estimator="exact")
    u.set_state(qpos, qvel)
    out = u.grad_step(action, estimator=estimator)
    assert out.info["max_contact_force"] == 0.0 and out.info["bundle_dropped"] == 0
    np.testing.assert_allclose(out.jacobians.A, exact.jacobians.A, atol=1e-4)
    np.testing.assert_allclose(out.jacobians.B, exact.jacobians.B, atol=1e-4)


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


def test_zeroth_order_sample_count_below_nx_plus_nu_is_refused(env):
    """The C backend resolves and checks BundleConfig.num_samples like the MJX one."""
    env.reset(seed=0)
    with pytest.raises(ValueError, match="BundleConfig.num_samples must be >= nx \\+ nu = 12"):
        env.unwrapped.grad_step(
            np.zeros(2, np.float32), estimator="zeroth", bundle=bcg_envs.BundleConfig(num_samples=6)
        )
    out = env.unwrapped.grad_step(
        np.zeros(2, np.float32),
        estimator="zeroth",
        bundle=bcg_envs.BundleConfig(num_samples=6, allow_underdetermined=True),
    )
    assert np.isfinite(out.jacobians.A).all()


# --------------------------------------------------------------------------------------
# Against MuJoCo's own transition derivatives
# --------------------------------------------------------------------------------------
def _converged(env):
    """``env`` with its constraint solver run to convergence (100 Newton iterations,
    tolerance 1e-15): a control step then no longer depends on the warm start, so MuJoCo's
    per-substep derivatives (which hold the warm start fixed) chain to the control step's.
    With the tasks' 4-5 iterations they differ by up to 25 % at some contact states."""
    m = env.unwrapped.simulation.core.s.model
    m.opt.iterations, m.opt.ls_iterations, m.opt.tolerance = 100, 100, 1e-15
    return env


def _integrated(m, qpos, dq):
    """qpos (+) dq (``mj_integratePos``)."""
    q = np.array(qpos, np.float64)
    mujoco.mj_integratePos(m, q, np.asarray(dq, np.float64), 1.0)
    return q


def _data_at(m, qpos, qvel, dq, dv, ctrl) -> mujoco.MjData:
    """A fresh ``MjData`` at (qpos (+) dq, qvel + dv) under ``ctrl``."""
    d = mujoco.MjData(m)
    d.qpos[:] = _integrated(m, qpos, dq)
    d.qvel[:] = qvel + dv
    d.ctrl[:] = ctrl
    return d


def _mujoco_transition_derivatives(m, n_substeps, qpos, qvel, dq, dv, ctrl):
    """(A, B) of ``n_substeps`` ``mj_step`` calls from (qpos + dq, qvel + dv) under ``ctrl``,
    chained from MuJoCo's centred finite-difference derivative of each substep
    (``mjd_transitionFD``): A = A_n ... A_1, B = sum_k A_n ... A_{k+1} B_k (tangent
    coordinates, d ctrl). Independent of the package's batched central differences."""
    d = _data_at(m, qpos, qvel, dq, dv, ctrl)
    nx = 2 * m.nv + m.na
    A, B = np.eye(nx), np.zeros((nx, m.nu))
    for _ in range(n_substeps):
        Ak, Bk = np.zeros((nx, nx)), np.zeros((nx, m.nu))
        mujoco.mjd_transitionFD(m, d, 1e-6, True, Ak, Bk, None, None)
        A, B = Ak @ A, Ak @ B + Bk
        mujoco.mj_step(m, d)
    return A, B


def _mujoco_control_step(m, n_substeps, qpos, qvel, dq, dv, ctrl):
    """(qpos, qvel) after ``n_substeps`` ``mj_step`` calls from (qpos + dq, qvel + dv)."""
    d = _data_at(m, qpos, qvel, dq, dv, ctrl)
    for _ in range(n_substeps):
        mujoco.mj_step(m, d)
    return d.qpos.copy(), d.qvel.copy()


def _tangent_map(m, base, point_of, eps=1e-6):
    """d (point_of(a) (-) base) / d a at a = 0 by central differences: (nv, nv), the
    identity where qpos has no quaternion and point_of(a) = base (+) a."""
    cols = []
    for e in eps * np.eye(m.nv):
        ends = []
        for q in (point_of(e), point_of(-e)):
            out = np.zeros(m.nv)
            mujoco.mj_differentiatePos(m, out, 1.0, base, q)
            ends.append(out)
        cols.append((ends[0] - ends[1]) / (2 * eps))
    return np.stack(cols, axis=1)


def _branch_derivatives_in_start_coordinates(m, n_substeps, qpos, qvel, dq, dv, ctrl, next_qpos):
    """A branch's (A, B) in the coordinates the estimators use: offsets from the step's
    start ``qpos`` in, offsets from the nominal next state ``next_qpos`` out. MuJoCo's
    derivatives at the branch use the tangent spaces at the branch's own start and end; on
    a quaternion the two differ by the exponential map's Jacobians, taken here by
    differences of ``mj_integratePos`` / ``mj_differentiatePos``."""
    A, B = _mujoco_transition_derivatives(m, n_substeps, qpos, qvel, dq, dv, ctrl)
    start = _integrated(m, qpos, dq)
    end, _ = _mujoco_control_step(m, n_substeps, qpos, qvel, dq, dv, ctrl)
    into, out = np.eye(A.shape[0]), np.eye(A.shape[0])
    into[: m.nv, : m.nv] = _tangent_map(m, start, lambda a: _integrated(m, qpos, np.asarray(dq) + a))
    out[: m.nv, : m.nv] = _tangent_map(m, next_qpos, lambda a: _integrated(m, end, a))
    return out @ A @ into, out @ B


def _ctrl_and_its_jacobians(s, info, action):
    """(ctrl, d ctrl / d u, d u / d action) of the env action: ``u`` the physics action,
    ``ctrl`` the task's ctrl map of it. Both maps are affine inside the action box, so
    their Jacobians are differences at +-0.5 (a small step would measure float32
    rounding)."""
    u_of = lambda a: np.asarray(s.physics_action(np.float32(a), info), np.float64)
    ctrl_of = lambda u: s.action_map(np.asarray(u, np.float64)[None])[0]
    eye = np.eye(len(action))
    P = np.stack([u_of(0.5 * e) - u_of(-0.5 * e) for e in eye], axis=1)
    M = np.stack([ctrl_of(0.5 * e) - ctrl_of(-0.5 * e) for e in np.eye(s.nu)], axis=1)
    return ctrl_of(u_of(action)), M, P


def _mujoco_reference(s, qpos, qvel, dx, du, ctrl, M, P):
    """The mean over offsets (dx, du) (k rows each; one zero row: the exact derivative) of
    MuJoCo's derivatives at each branch start, in the estimators' coordinates
    (``_branch_derivatives_in_start_coordinates``), B per env action: (A, B)."""
    m, nv = s.model, s.nv
    next_qpos, _ = _mujoco_control_step(m, s.n_substeps, qpos, qvel, np.zeros(nv), 0.0, ctrl)
    branches = [
        _branch_derivatives_in_start_coordinates(
            m, s.n_substeps, qpos, qvel, dx[i, :nv], dx[i, nv : 2 * nv], ctrl + M @ du[i], next_qpos
        )
        for i in range(len(dx))
    ]
    return np.mean([b[0] for b in branches], axis=0), np.mean([b[1] for b in branches], axis=0) @ M @ P


def _exact_reference(s, qpos, qvel, ctrl, M, P):
    return _mujoco_reference(s, qpos, qvel, np.zeros((1, s.nx)), np.zeros((1, s.nu)), ctrl, M, P)


def _rel(ours, ref):
    return np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), 1e-12)


@pytest.fixture(scope="module")
def converged_box_push():
    e = _converged(gym.make(ENV_ID, backend="mujoco"))
    e.reset(seed=0)
    yield e
    e.close()


def test_exact_jacobians_match_mujoco_transition_derivatives(converged_box_push):
    """BoxPush, free and pressing a box face (sliding and spinning): exact A and B equal
    MuJoCo's chained per-substep derivatives to 1e-5 relative (measured ~1e-7)."""
    u = converged_box_push.unwrapped
    s = u.simulation.core.s
    for contact, qpos, qvel, action in _free_and_contact_states(np.random.default_rng(0), 3):
        u.set_state(qpos, qvel)
        ctrl, M, P = _ctrl_and_its_jacobians(s, dict(u.simulation.core.info), action)
        qpos, qvel = u.simulation.core.d.qpos.copy(), u.simulation.core.d.qvel.copy()
        out = u.grad_step(action, estimator="exact")
        assert (out.info["max_contact_force"] > 0) == contact
        A, B = _exact_reference(s, qpos, qvel, ctrl, M, P)
        assert _rel(out.jacobians.A, A) < 1e-5 and _rel(out.jacobians.B, B) < 1e-5, contact


def test_exact_jacobians_match_mujoco_transition_derivatives_along_a_planar_hand_rollout():
    """PlanarHand under random actions: at most steps with finger-disc contact, exact A
    equals MuJoCo's chained derivatives to 1e-5 relative (measured 1e-10 to 5e-7). A step
    whose perturbations straddle a contact switch has no derivative to agree on (one of
    the 13 contact steps of this rollout: 100 %), hence 80 %, not all."""
    env = _converged(gym.make("bcg_envs/PlanarHand-v0", backend="mujoco"))
    env.reset(seed=0)
    u = env.unwrapped
    s = u.simulation.core.s
    rng = np.random.default_rng(1)
    agree = []
    for _ in range(60):
        action = rng.uniform(-1, 1, s.nu).astype(np.float32)
        d = u.simulation.core.d
        qpos, qvel = d.qpos.copy(), d.qvel.copy()
        ctrl, M, P = _ctrl_and_its_jacobians(s, dict(u.simulation.core.info), action)
        out = u.grad_step(action, estimator="exact")
        if out.info["max_contact_force"] > 0:
            A, B = _exact_reference(s, qpos, qvel, ctrl, M, P)
            agree.append(_rel(out.jacobians.A, A) < 1e-5 and _rel(out.jacobians.B, B) < 1e-5)
    env.close()
    assert len(agree) >= 8 and np.mean(agree) >= 0.8, agree


def _recorded_offsets(monkeypatch) -> list:
    """The (dx, du) offsets of every bundle the C estimators draw from now on, read where
    they are drawn."""
    from bcg_envs.mujoco_backend import jacobians

    drawn = []
    draw = jacobians._sample
    monkeypatch.setattr(jacobians, "_sample", lambda *a: drawn.append(draw(*a)) or drawn[-1])
    return drawn


@pytest.mark.parametrize("estimator, space", [("bcg", "cartesian"), ("bcg", "joint"), ("bundle", "cartesian")])
def test_bundle_is_the_mean_of_mujoco_derivatives_at_its_branches(converged_box_push, monkeypatch, estimator, space):
    """The pusher pressing into the box: the bundled A and B (bcg's contact-local branches,
    and the global first-order bundle's) are the mean, over the branches drawn, of MuJoCo's
    chained derivatives at each branch's start (the state offset applied in tangent
    coordinates, the action offset on the physics action), times d ctrl / d action."""
    drawn = _recorded_offsets(monkeypatch)
    u = converged_box_push.unwrapped
    s = u.simulation.core.s
    qpos, qvel, _ = _pressing_state()
    action = np.array([0.9, -0.2], np.float32)  # inside the box: the clip passes d/da
    u.set_state(qpos, qvel)
    ctrl, M, P = _ctrl_and_its_jacobians(s, dict(u.simulation.core.info), action)
    out = u.grad_step(action, estimator=estimator, bundle=bcg_envs.BundleConfig(space=space))
    assert out.info["bundled"] and out.info["bundle_dropped"] == 0 and len(drawn) == 1
    dx, du = drawn[0]
    assert dx.shape[1] == s.nx and np.all(np.abs(dx[:, : s.nv]).max(1) > 0)
    A, B = _mujoco_reference(s, qpos, qvel, dx, du, ctrl, M, P)
    assert _rel(out.jacobians.A, A) < 1e-4 and _rel(out.jacobians.B, B) < 1e-4
    # ... and the bundle is not the exact derivative at the start (it smooths the strike)
    assert _rel(out.jacobians.A, _exact_reference(s, qpos, qvel, ctrl, M, P)[0]) > 1e-2


def test_zeroth_order_is_the_least_squares_fit_of_mujoco_steps_at_its_samples(converged_box_push, monkeypatch):
    """The pusher pressing into the box: ``zeroth``'s A and B are the least-squares linear
    fit of the next-state offsets (tangent coordinates, from MuJoCo steps rolled here) on
    the sample offsets it drew, times d ctrl / d action."""
    drawn = _recorded_offsets(monkeypatch)
    u = converged_box_push.unwrapped
    s = u.simulation.core.s
    m = s.model
    qpos, qvel, _ = _pressing_state()
    action = np.array([0.9, -0.2], np.float32)
    u.set_state(qpos, qvel)
    ctrl, M, P = _ctrl_and_its_jacobians(s, dict(u.simulation.core.info), action)
    out = u.grad_step(action, estimator="zeroth")
    assert out.info["bundled"] and out.info["bundle_dropped"] == 0 and len(drawn) == 1
    dx, du = drawn[0]
    q0, v0 = _mujoco_control_step(m, s.n_substeps, qpos, qvel, np.zeros(s.nv), 0.0, ctrl)
    dy = []
    for i in range(len(dx)):
        q1, v1 = _mujoco_control_step(
            m, s.n_substeps, qpos, qvel, dx[i, : s.nv], dx[i, s.nv : 2 * s.nv], ctrl + M @ du[i]
        )
        dq = np.zeros(s.nv)
        mujoco.mj_differentiatePos(m, dq, 1.0, q0, q1)
        dy.append(np.concatenate([dq, v1 - v0]))
    fit, *_ = np.linalg.lstsq(np.concatenate([dx, du], axis=1), np.array(dy), rcond=None)
    A, B = fit[: s.nx].T, fit[s.nx :].T
    assert _rel(out.jacobians.A, A) < 1e-6 and _rel(out.jacobians.B, B @ M @ P) < 1e-6


def test_bcg_step_inside_its_window_is_the_mean_of_mujoco_derivatives_at_its_branches(converged_box_push, monkeypatch):
    """The step after a strike, inside bcg's two-step window: bundled again (from fresh
    offsets at that step's start), and again the mean of MuJoCo's derivatives there."""
    drawn = _recorded_offsets(monkeypatch)
    u = converged_box_push.unwrapped
    s = u.simulation.core.s
    qpos, qvel, _ = _pressing_state()
    u.set_state(qpos, qvel)
    first = u.grad_step(np.array([0.9, -0.2], np.float32), estimator="bcg")
    assert first.info["bundled"] and first.info["bundle_window"] == 1
    action = np.array([-0.5, 0.3], np.float32)
    q1, v1 = u.simulation.core.d.qpos.copy(), u.simulation.core.d.qvel.copy()
    ctrl, M, P = _ctrl_and_its_jacobians(s, dict(u.simulation.core.info), action)
    out = u.grad_step(action, estimator="bcg")
    assert out.info["bundled"] and out.info["bundle_window"] == 0 and len(drawn) == 2
    dx, du = drawn[1]
    A, B = _mujoco_reference(s, q1, v1, dx, du, ctrl, M, P)
    assert _rel(out.jacobians.A, A) < 1e-4 and _rel(out.jacobians.B, B) < 1e-4


@pytest.mark.integration
@pytest.mark.parametrize("estimator", ["exact", "bundle"])
def test_g1_jacobians_in_flight_match_mujoco_transition_derivatives(estimator, monkeypatch):
    """G1Jump 1 m above the floor (no contact), its pelvis turned 0.46 rad about a skew axis
    and every joint moving: A and B in the tangent space of the free joint's quaternion
    equal MuJoCo's chained derivatives to 1e-6 relative (measured <= 2e-9 for A, 8e-8 for
    B), at the state for ``exact``, and as the mean over the ``bundle``'s branches for the
    global bundle, each branch's derivative taken in the step's start and nominal end
    coordinates (without that change of coordinates the two differ by 2e-5: the branches'
    quaternions sit up to 0.03 rad from the start's)."""
    drawn = _recorded_offsets(monkeypatch)
    env = _converged(gym.make("bcg_envs/G1Jump-v0", backend="mujoco"))
    env.reset(seed=0)
    u = env.unwrapped
    s = u.simulation.core.s
    rng = np.random.default_rng(0)
    qpos, qvel, _ = u.get_state()
    qpos, qvel = np.array(qpos, np.float64), rng.normal(0.0, 0.5, len(qvel))
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    qpos[2] += 1.0
    qpos[3:7] = np.concatenate([[np.cos(0.23)], np.sin(0.23) * axis])
    u.set_state(qpos.astype(np.float32), qvel.astype(np.float32))
    q0, v0 = u.simulation.core.d.qpos.copy(), u.simulation.core.d.qvel.copy()
    action = rng.uniform(-0.5, 0.5, s.nu).astype(np.float32)
    ctrl, M, P = _ctrl_and_its_jacobians(s, dict(u.simulation.core.info), action)
    out = u.grad_step(action, estimator=estimator)
    env.close()
    assert out.info["max_contact_force"] == 0.0 and out.info["bundle_dropped"] == 0
    if estimator == "exact":
        A, B = _exact_reference(s, q0, v0, ctrl, M, P)
    else:
        ((dx, du),) = drawn
        A, B = _mujoco_reference(s, q0, v0, dx, du, ctrl, M, P)
    assert _rel(out.jacobians.A, A) < 1e-6 and _rel(out.jacobians.B, B) < 1e-6
