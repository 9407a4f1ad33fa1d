"""Tests of PlanarHand-v0: API conformance, exact Jacobians against MuJoCo C finite
differences, bcg triggering, finite rollout gradients and random-policy stability.

Compiles dominate the run time (2 CPU cores): one Gymnasium env is shared by the tests
(its jitted step/grad_step compile once per estimator, see ``_grad_step_at``), rollouts
are vmapped over states in a single compile per estimator, and the bundle-only
estimators of the rollout-gradient test run in the integration tier.
"""

import copy
import functools
import itertools
import warnings
from types import SimpleNamespace

import gymnasium as gym
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import bcg_envs
from bcg_envs import BundleConfig
from bcg_envs.envs.planar_hand.hand import PlanarHand

ENV_ID = "bcg_envs/PlanarHand-v0"
FINGER_GEOMS = ("left_proximal", "left_distal", "left_tip", "right_proximal", "right_distal", "right_tip")

#: Norm-wise relative error allowed between MJX's exact Jacobians and MuJoCo C central
#: differences. MJX (float32 or float64 alike) and MuJoCo C differ in their sphere-capsule
#: contacts by ~4e-4 relative (MJX's closest_segment_point divides by |ab|^2 + 1e-6, a
#: 2-4e-4 bias on these 5-7 cm finger links), which moves contact normals by ~1e-4 rad;
#: Jacobians then agree to 2-7e-4, and float32 adds ~1e-5.
JAC_RTOL = 1e-3


# ----- MuJoCo C reference ---------------------------------------------------------------
class CReference:
    """MuJoCo C control steps in float64 on the environment's own ``MjModel``."""

    def __init__(self, model: mujoco.MjModel, n_substeps: int):
        self.model = model
        self.n_substeps = n_substeps
        self.data = mujoco.MjData(model)
        # The same model solved to convergence: states where 4 Newton iterations have not
        # converged depend on solver internals that MJX and C implement differently.
        self.converged = copy.copy(model)
        self.converged.opt.iterations, self.converged.opt.ls_iterations, self.converged.opt.tolerance = 100, 50, 1e-15
        self.converged_data = mujoco.MjData(self.converged)
        self.finger_of_geom = {model.geom(n).id: (0 if n.startswith("left") else 1) for n in FINGER_GEOMS}
        lo, hi = model.actuator_ctrlrange.T
        self.lo, self.hi = lo.astype(np.float64), hi.astype(np.float64)

    def ctrl(self, action):
        """The documented action map: joint range midpoint + action * half range."""
        a = np.asarray(action, np.float64)
        return (self.lo + self.hi) / 2 + a * (self.hi - self.lo) / 2

    def step(self, qpos, qvel, ctrl, converged=False):
        """Next (qpos, qvel), contact signature per substep, largest normal force (N)."""
        m, d = (self.converged, self.converged_data) if converged else (self.model, self.data)
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
        signature, fmax, force = [], 0.0, np.zeros(6)
        for _ in range(self.n_substeps):
            mujoco.mj_step(m, d)
            pairs = tuple(sorted((int(c.geom1), int(c.geom2)) for c in d.contact[: d.ncon]))
            signature.append((pairs, tuple(d.efc_type[: d.nefc]), tuple(d.efc_state[: d.nefc])))
            for i in range(d.ncon):
                mujoco.mj_contactForce(m, d, i, force)
                fmax = max(fmax, force[0])
        return np.concatenate([d.qpos, d.qvel]), tuple(signature), fmax

    def fingers(self, signature):
        return {
            self.finger_of_geom[g]
            for pairs, _, _ in signature
            for pair in pairs
            for g in pair
            if g in self.finger_of_geom
        }

    def jacobians(self, qpos, qvel, action, eps=1e-6, converged=False):
        """Central differences of the step in x = (qpos, qvel) and in the action (with the
        solver run to convergence when ``converged``)."""
        nv, nu = self.model.nv, self.model.nu
        x0 = np.concatenate([qpos, qvel]).astype(np.float64)
        a0 = np.asarray(action, np.float64)
        _, sig0, _ = self.step(x0[:nv], x0[nv:], self.ctrl(a0), converged)
        same = True

        def diff(xp, ap, xm, am):
            nonlocal same
            yp, sp, _ = self.step(xp[:nv], xp[nv:], self.ctrl(ap), converged)
            ym, sm, _ = self.step(xm[:nv], xm[nv:], self.ctrl(am), converged)
            same &= sp == sig0 and sm == sig0
            return (yp - ym) / (2 * eps)

        E = np.eye(2 * nv + nu) * eps
        A = np.stack([diff(x0 + E[i, : 2 * nv], a0, x0 - E[i, : 2 * nv], a0) for i in range(2 * nv)], 1)
        B = np.stack([diff(x0, a0 + E[2 * nv + j, 2 * nv :], x0, a0 - E[2 * nv + j, 2 * nv :]) for j in range(nu)], 1)
        return A, B, same

    def well_posed(self, qpos, qvel, action, deltas=(1e-6, 1e-5)):
        """Away from contact on/off and friction stick/slip switches (the constraint set
        and every constraint's state are unchanged at every substep under +-delta on each
        state and action coordinate), with the 4-iteration solver converged."""
        nv = self.model.nv
        x0 = np.concatenate([qpos, qvel]).astype(np.float64)
        a0 = np.asarray(action, np.float64)
        y0, sig0, _ = self.step(x0[:nv], x0[nv:], self.ctrl(a0))
        y_conv, _, _ = self.step(x0[:nv], x0[nv:], self.ctrl(a0), converged=True)
        if np.max(np.abs(y_conv - y0)) > 1e-9:
            return False
        for k, sign, delta in itertools.product(range(x0.size + a0.size), (1.0, -1.0), deltas):
            x, a = x0.copy(), a0.copy()
            if k < x0.size:
                x[k] += sign * delta
            else:
                a[k - x0.size] += sign * delta
            if self.step(x[:nv], x[nv:], self.ctrl(a))[1] != sig0:
                return False
        return True


def _rollout_states(ref: CReference, rng, mode: str, episodes: int, steps: int = 40):
    """(qpos, qvel, action) samples (float32) along MuJoCo C random-action rollouts.

    mode 'both': both fingers random; 'left'/'right': the other finger held open;
    'release': both fingers random for 8 steps, then both held open (the disc slides
    free of contact)."""
    m = ref.model
    d = mujoco.MjData(m)
    out = []
    for _ in range(episodes):
        mujoco.mj_resetData(m, d)
        d.qpos[:4] = np.array([-0.45, 0.05, -0.45, 0.05]) + rng.uniform(-0.1, 0.1, 4)
        d.qpos[6] = rng.uniform(-0.3, 0.3)
        for t in range(steps):
            a = rng.uniform(-0.8, 0.8, 4)
            if mode == "release":
                a = rng.uniform(0.0, 1.0, 4) if t < 8 else rng.uniform(-1.0, -0.8, 4)
            if mode == "right":
                a[:2] = rng.uniform(-1.0, -0.8, 2)
            if mode == "left":
                a[2:] = rng.uniform(-1.0, -0.8, 2)
            if t >= 6:
                out.append((d.qpos.astype(np.float32), d.qvel.astype(np.float32), a.astype(np.float32)))
            d.ctrl[:] = ref.ctrl(a)
            for _ in range(ref.n_substeps):
                mujoco.mj_step(m, d)
    return out


def _disc_moving(qvel) -> bool:
    """The disc moves at the start of the step (see test_exact_jacobian_disc_at_rest)."""
    return np.max(np.abs(qvel[4:])) > 1e-3


def _grad_step_at(u, qpos, qvel, action, estimator):
    """``grad_step`` from (qpos, qvel) through the Gymnasium env's own API.

    Every call goes through set_state so that the jitted grad_step always sees the same
    input signature: ``set_state`` builds its state eagerly, as committed arrays, while
    the jitted reset/step/grad_step return uncommitted ones, and jit compiles the two
    separately (1-4 min per grad_step compile on 2 busy cores). The reset first gives
    every call the same task info (goal) and step count."""
    u.reset(seed=0)
    u.set_state(qpos, qvel)
    return u.grad_step(action, estimator=estimator)


# ----- fixtures ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def env():
    e = gym.make(ENV_ID)
    e.reset(seed=0)
    yield e
    e.close()


@pytest.fixture(scope="module")
def ref(env):
    u = env.unwrapped
    return CReference(u.model, round(u.jax_env.dt / u.model.opt.timestep))


@pytest.fixture(scope="module")
def fd_states(ref):
    """12 well-posed states with the disc moving: 2 without contact, 3 with only the left
    finger, 3 with only the right finger and 4 with both fingers touching the disc
    during the step."""
    rng = np.random.default_rng(7)
    wanted = {(): 2, (0,): 3, (1,): 3, (0, 1): 4}
    picked = {k: [] for k in wanted}
    for mode in ("release", "left", "right", "both"):
        for qpos, qvel, a in _rollout_states(ref, rng, mode, episodes=6):
            if not _disc_moving(qvel):
                continue
            _, sig, _ = ref.step(qpos, qvel, ref.ctrl(a))
            key = tuple(sorted(ref.fingers(sig)))
            if len(picked[key]) < wanted[key] and ref.well_posed(qpos, qvel, a):
                picked[key].append((qpos, qvel, a))
    for key, n in wanted.items():
        assert len(picked[key]) == n, f"found {len(picked[key])} of {n} well-posed states with fingers {key} in contact"
    return [s for states in picked.values() for s in states]


# ----- API conformance ---------------------------------------------------------------------
def test_model_dimensions_and_options(env):
    m = env.unwrapped.model
    je = env.unwrapped.jax_env
    assert (m.nq, m.nv, m.nu, m.na) == (7, 7, 4, 0)
    assert je.state_size == 14 and je.action_size == 4 and je.observation_size == 21
    assert m.opt.timestep == 0.004 and je.dt == pytest.approx(0.04) and je.episode_length == 200
    assert (m.opt.iterations, m.opt.ls_iterations) == (4, 8)
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert m.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL and m.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    assert je.contact_stiffness == "stiff" and np.all(m.geom_solref[:, 0] == 0.008)
    # Only finger-disc pairs can collide: every colliding pair has the disc on one side.
    disc = m.geom("object").id
    collide = [
        (i, j)
        for i in range(m.ngeom)
        for j in range(i + 1, m.ngeom)
        if (m.geom_contype[i] & m.geom_conaffinity[j]) or (m.geom_contype[j] & m.geom_conaffinity[i])
    ]
    assert len(collide) == 6 and all(disc in pair for pair in collide)
    soft = PlanarHand(contact_stiffness="soft", estimator="exact")
    assert np.all(soft.mj_model.geom_solref[:, 0] == 0.05)


def test_gymnasium_and_sb3_check_env(env):
    from gymnasium.utils.env_checker import check_env as gym_check_env

    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym_check_env(env.unwrapped)
        sb3_checker.check_env(env)
    space_warnings = [str(w.message) for w in caught if "space" in str(w.message).lower()]
    assert not space_warnings, space_warnings
    assert env.observation_space.shape == (21,) and env.action_space.shape == (4,)


def test_reset_distribution_and_termination():
    je = PlanarHand(estimator="exact")
    qpos, qvel, info = jax.jit(jax.vmap(je.initial_state))(jax.random.split(jax.random.PRNGKey(3), 256))
    qpos, goal = np.asarray(qpos), np.asarray(info["goal_yaw"])
    assert np.all(np.asarray(qvel) == 0)
    assert np.all(np.abs(goal) <= np.deg2rad(60) + 1e-6) and goal.max() - goal.min() > np.deg2rad(100)
    wide = PlanarHand(estimator="exact", config={"goal_yaw_range": np.deg2rad(150)})  # the harder setting
    _, _, wide_info = jax.vmap(wide.initial_state)(jax.random.split(jax.random.PRNGKey(3), 256))
    assert np.ptp(np.asarray(wide_info["goal_yaw"])) > np.deg2rad(250)
    assert np.all(np.linalg.norm(qpos[:, 4:6], axis=1) < 0.015)
    # No finger touches the disc at reset (MuJoCo C collision check of every sample).
    m = je.mj_model
    d = mujoco.MjData(m)
    for q in qpos:
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        assert d.ncon == 0
    # The disc is dropped (out of the fingers' reach) 10 cm from the palm centre.
    data = SimpleNamespace(qpos=jnp.asarray(qpos[0]))
    assert not je.terminated(data, {})
    assert je.terminated(SimpleNamespace(qpos=data.qpos.at[5].set(0.101)), {})
    assert not je.terminated(SimpleNamespace(qpos=data.qpos.at[4:6].set(jnp.array([0.07, -0.07]))), {})


# ----- exact Jacobians vs MuJoCo C finite differences -------------------------------------
@pytest.mark.integration
def test_exact_jacobians_match_mujoco_c_finite_differences(env, ref, fd_states):
    u = env.unwrapped
    nv = ref.model.nv
    a_test = np.array([0.3, -0.7, 0.9, -0.2], np.float32)
    np.testing.assert_allclose(np.asarray(u.jax_env.action_to_ctrl(jnp.asarray(a_test))), ref.ctrl(a_test), atol=1e-6)
    report = []
    for qpos, qvel, action in fd_states:
        A_fd, B_fd, same = ref.jacobians(qpos, qvel, action)
        assert same, "the contact set changed inside the finite-difference stencil"
        out = _grad_step_at(u, qpos, qvel, action, "exact")
        A, B = np.asarray(out.jacobians.A, np.float64), np.asarray(out.jacobians.B, np.float64)
        err_a = np.linalg.norm(A - A_fd) / np.linalg.norm(A_fd)
        err_b = np.linalg.norm(B - B_fd) / np.linalg.norm(B_fd)
        # Position rows alone too: they are small next to the stiff velocity rows.
        err_pos = np.linalg.norm(A[:nv] - A_fd[:nv]) / np.linalg.norm(A_fd[:nv])
        y_c, sig, _ = ref.step(qpos, qvel, ref.ctrl(action))
        y_mjx = np.concatenate(u.get_state()[:2])
        err_y = np.linalg.norm(y_mjx - y_c) / np.linalg.norm(y_c)
        report.append((sorted(ref.fingers(sig)), err_a, err_b, err_pos, err_y))
    bad = [r for r in report if max(r[1:]) >= JAC_RTOL]
    assert not bad, "fingers, rel. err A, B, A position rows, next state:\n" + "\n".join(map(str, bad))


@pytest.mark.integration
def test_exact_jacobian_with_disc_at_rest(env, ref):
    """Right after reset the disc is exactly at rest and no finger touches it: MJX's solver
    starts at its optimum (regression test for bcg_envs.physics.implicit_step)."""
    u = env.unwrapped
    u.reset(seed=1)
    qpos, qvel, _ = u.get_state()
    action = np.full(4, -0.9, np.float32)  # keep the fingers open: no contact in the step
    _, sig, _ = ref.step(qpos, qvel, ref.ctrl(action))
    assert not ref.fingers(sig) and ref.well_posed(qpos, qvel, action)
    # The reference solves to convergence: a 1e-6 velocity perturbation of a disc held by
    # friction changes the cost by less than the 4-iteration solver's tolerance, so C stops
    # early and its differences measure solver noise (d yaw rate / d yaw rate = -0.038 with
    # 4 iterations, 0.0090 converged or with eps = 1e-4; MJX's implicit derivative: 0.0090).
    A_fd, B_fd, _ = ref.jacobians(qpos, qvel, action, converged=True)
    out = _grad_step_at(u, qpos, qvel, action, "exact")
    A = np.asarray(out.jacobians.A, np.float64)
    assert np.linalg.norm(A - A_fd) / np.linalg.norm(A_fd) < JAC_RTOL


# ----- bcg triggering -----------------------------------------------------------------------
@pytest.mark.integration
def test_bcg_bundles_only_when_pressing_and_is_exact_otherwise(env, ref):
    u = env.unwrapped
    threshold = u.jax_env.bundle.force_threshold
    assert threshold == PlanarHand.default_force_threshold == 5.0
    rng = np.random.default_rng(11)
    groups = {"free": [], "touch": [], "press": []}
    for qpos, qvel, a in _rollout_states(ref, rng, "both", episodes=4) + _rollout_states(
        ref, rng, "release", episodes=1
    ):
        _, sig, force = ref.step(qpos, qvel, ref.ctrl(a))
        if force == 0.0:
            group = "free"
        elif force < threshold - 1.0:
            group = "touch"
        elif force > threshold + 1.0:
            group = "press"
        else:
            continue
        if len(groups[group]) < 2:
            groups[group].append((qpos, qvel, a, force))
    assert all(len(g) == 2 for g in groups.values()), {k: len(g) for k, g in groups.items()}
    for group, states in groups.items():
        for qpos, qvel, a, force_c in states:
            bcg = _grad_step_at(u, qpos, qvel, a, "bcg")
            exact = _grad_step_at(u, qpos, qvel, a, "exact")
            bundled = bool(bcg.info["bundled"])
            assert not exact.info["bundled"]
            assert bundled == (group == "press"), (group, force_c, bcg.info["max_contact_force"])
            assert bcg.info["max_contact_force"] == pytest.approx(force_c, rel=0.05, abs=0.05)
            for name in ("A", "B"):
                jb, je_ = getattr(bcg.jacobians, name), getattr(exact.jacobians, name)
                assert np.all(np.isfinite(jb))
                if bundled:
                    assert not np.allclose(jb, je_, rtol=1e-3, atol=1e-3), f"bundled {name} equals exact"
                else:
                    np.testing.assert_allclose(jb, je_, rtol=1e-5, atol=1e-5 * np.abs(je_).max())


# ----- rollout gradients --------------------------------------------------------------------
#: Rollouts per rollout-gradient check (each is 32 steps of forward-mode Jacobians).
ENVS = 10


@functools.lru_cache(maxsize=None)
def _rollout_grad_fn(estimator: str):
    """jit(vmap(grad)) of a 32-step return w.r.t. the actions (one compile per estimator).

    The bundle estimators use 4 branches instead of 10: the same code paths at 2.5x less
    run time (every bcg step evaluates all its branches, triggered or not). The fitted
    estimators (zeroth, alpha) need more than nx + nu = 18 branches for a determined fit,
    so they keep their defaults."""
    bundle = None if estimator in ("exact", "zeroth", "alpha") else BundleConfig(num_samples=4)
    je = bcg_envs.make_jax("PlanarHand-v0", estimator=estimator, bundle=bundle)

    def ret(acts, state):
        def body(s, a):
            s = je.step(s, a)
            return s, (s.reward, s.info["bundled"], s.info["max_contact_force"])

        _, (rewards, bundled, force) = jax.lax.scan(body, state, acts)
        return jnp.sum(rewards), (bundled, force)

    states = jax.vmap(je.reset)(jax.random.split(jax.random.PRNGKey(5), ENVS))
    return je, states, jax.jit(jax.vmap(jax.grad(ret, has_aux=True)))


@pytest.mark.long
@pytest.mark.parametrize("estimator", ["exact", "bcg", "bundle", "zeroth", "alpha"])
def test_rollout_gradients_are_finite(estimator):
    """jax.grad of a 32-step scan rollout from 10 random initial states is finite."""
    je, states, grad = _rollout_grad_fn(estimator)
    # Random actions biased to close the fingers: they reach the disc within a few steps.
    actions = jax.random.uniform(jax.random.PRNGKey(6), (ENVS, 32, 4), minval=-0.6, maxval=1.0)
    g, (bundled, force) = grad(actions, states)
    g, bundled, force = np.asarray(g), np.asarray(bundled), np.asarray(force)
    assert g.shape == (ENVS, 32, 4)
    assert np.all(np.isfinite(g))
    assert np.abs(g).max() > 0
    assert np.mean(force > 0) > 0.3, "the rollouts should be mostly in contact"
    if estimator == "bcg":
        assert np.any(bundled) and not np.all(bundled)
        np.testing.assert_array_equal(bundled, force > je.bundle.force_threshold)


@pytest.mark.integration
def test_rollout_gradients_finite_with_disc_untouched_for_12_steps():
    """Before bcg_envs.physics.implicit_step, 12 steps at rest overflowed in backprop."""
    je, states, grad = _rollout_grad_fn("exact")
    # float32, not weakly typed: the same compiled program as the test above.
    actions = jnp.concatenate([jnp.full((12, 4), -1.0, jnp.float32), jnp.full((20, 4), 0.8, jnp.float32)])
    g, _ = grad(jnp.broadcast_to(actions, (ENVS, 32, 4)), states)
    assert np.all(np.isfinite(np.asarray(g)))


# ----- random policy --------------------------------------------------------------------------
@pytest.mark.integration
def test_random_policy_2000_steps_finite_and_force_split(env):
    """2,000 steps of uniform random actions through the Gymnasium env (its jitted step is
    already compiled by check_env), then 2,000 gentle (x 0.25) ones: observations and
    rewards stay finite and the force threshold splits the two."""
    u = env.unwrapped
    threshold = u.jax_env.bundle.force_threshold
    rng = np.random.default_rng(2)
    forces = {}
    for amp in (1.0, 0.25):
        u.reset(seed=int(amp * 100))
        obs_all, rew_all, force, episodes = [], [], [], 1
        for _ in range(2000):
            obs, rew, terminated, truncated, info = u.step(amp * rng.uniform(-1.0, 1.0, 4).astype(np.float32))
            obs_all.append(obs)
            rew_all.append(rew)
            force.append(info["max_contact_force"])
            assert not info["sim_diverged"]
            if terminated or truncated:
                u.reset()
                episodes += 1
        obs_all, rew_all, forces[amp] = np.array(obs_all), np.array(rew_all), np.array(force)
        assert np.all(np.isfinite(obs_all)) and np.all(np.isfinite(rew_all)) and np.all(np.isfinite(forces[amp]))
        assert np.all(np.abs(obs_all) < 1e3)
        assert episodes >= 10  # 200-step episodes (truncation) or earlier drops
    touching = forces[1.0][forces[1.0] > 0]
    assert touching.size > 0.15 * forces[1.0].size  # 22 % (the disc is small for the fingers' sweep)
    # Uniform random actions press hard on a good part of their contact steps...
    assert 0.15 < np.mean(touching > threshold) < 0.75
    # ...while gentle random manipulation (in contact 37 % of the steps) stays below the threshold.
    assert np.mean(forces[0.25] > 0) > 0.25 and np.mean(forces[0.25] > threshold) < 0.01


@pytest.mark.integration
def test_grad_step_along_random_trajectory_is_finite(env):
    """50 grad_step calls (exact and bcg alternating), each from where the last one ended."""
    u = env.unwrapped
    u.reset(seed=4)
    qpos, qvel, _ = u.get_state()
    rng = np.random.default_rng(4)
    bundled = 0
    for i in range(50):
        estimator = "bcg" if i % 2 else "exact"
        out = _grad_step_at(u, qpos, qvel, rng.uniform(-1.0, 1.0, 4).astype(np.float32), estimator)
        for j in out.jacobians:
            assert np.all(np.isfinite(j))
        assert out.jacobians.A.shape == (14, 14) and out.jacobians.B.shape == (14, 4)
        assert out.jacobians.C.shape == (21, 14)
        bundled += bool(out.info["bundled"])
        if out.terminated:
            u.reset(seed=100 + i)
        qpos, qvel, _ = u.get_state()
    assert bundled > 0


# ----- success and scoring ----------------------------------------------------------------------
def test_success_definition_on_hand_built_states():
    """Disc yaw within 0.1 rad of the target (wrapped) while the disc is on the table."""
    je = PlanarHand(estimator="exact")
    info = {"goal_yaw": jnp.array(0.5)}

    def success(dyaw, x=0.0):
        qpos = jnp.array([0.0, 0.0, 0.0, 0.0, x, 0.0, 0.5 + dyaw])
        return bool(je.success(SimpleNamespace(qpos=qpos), info))

    assert success(0.0) and success(0.09) and success(-0.09) and success(2 * np.pi + 0.05)
    assert not success(0.11) and not success(-0.11)
    assert success(0.0, x=0.09) and not success(0.0, x=0.11)  # dropped: not a success


@pytest.fixture(scope="module")
def scores():
    from bcg_envs.envs.evaluation import run_episodes
    from bcg_envs.envs.planar_hand.scripted import POLICIES

    return {k: run_episodes("PlanarHand-v0", make(), episodes=20, backend="mujoco") for k, make in POLICIES.items()}


@pytest.mark.integration
def test_escape_scores_below_doing_nothing_and_the_scripted_controller_above_both(scores):
    """20 seeds (MuJoCo C): throwing the disc out ends the episode and forfeits the rest."""
    escape, nothing, scripted = (scores[k] for k in ("escape", "nothing", "scripted"))
    assert np.mean(escape["lengths"] < 200) >= 0.8  # the strikes do throw the disc out
    assert escape["mean_return"] < nothing["mean_return"] < scripted["mean_return"]
    assert scripted["success_rate"] >= 0.8 > nothing["success_rate"]


def test_scripted_controller_geometry_matches_the_model():
    """The scripted controller's finger kinematics (link lengths, bases, joint ranges) are
    the model's: its inverse kinematics puts MuJoCo's fingertip sites on the targets."""
    from bcg_envs.envs.planar_hand import scripted

    m = PlanarHand(estimator="exact").mj_model
    d = mujoco.MjData(m)
    np.testing.assert_allclose(m.jnt_range[:4], [[-1.0, 1.0], [-1.0, 2.2]] * 2)
    for target in ([0.04, 0.01], [0.03, -0.02], [0.045, 0.02]):
        target = np.array(target)
        d.qpos[2:4], _ = scripted.finger_ik(target, 1)
        d.qpos[0:2], _ = scripted.finger_ik(target * [-1, 1], -1)
        mujoco.mj_kinematics(m, d)
        np.testing.assert_allclose(d.site("right_tip").xpos[:2], target, atol=1e-6)
        np.testing.assert_allclose(d.site("left_tip").xpos[:2], target * [-1, 1], atol=1e-6)


@pytest.mark.long
def test_scripted_controller_succeeds_in_80_percent_of_100_episodes():
    from bcg_envs.envs.evaluation import run_episodes
    from bcg_envs.envs.planar_hand.scripted import scripted_rotate

    result = run_episodes("PlanarHand-v0", scripted_rotate, episodes=100, backend="mujoco")
    assert result["success_rate"] >= 0.8, result["success_rate"]
