"""The differentiable step's backward pass and the batched ``bcg`` rule: VJPs against
transposed Jacobians, branch windows against hand-rolled branch gradients, bundles only
for triggered envs."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg_envs
from bcg_envs.gradients.differentiable_step import bcg_chunk
from bcg_envs.physics.simulator import control_step_with_contacts
from tests.ball_wall import XML as BALL_XML
from tests.fresh_process import run_fresh


@pytest.fixture(scope="module")
def env():
    """One env for the module, so that its step programs are traced and compiled once: a
    fresh env's batched bcg program lowers to differently numbered MLIR, which misses the
    persistent compile cache. One-step bundles (``horizon=1``): the module checks the
    batched rule of a single step, not branch rollouts (tests/gradients/test_branch_rollouts.py)."""
    return bcg_envs.make_jax("BoxPush-v0", estimator="bcg", bundle=bcg_envs.BundleConfig(horizon=1))


@pytest.fixture(scope="module")
def batched_jacobians(env):
    """The bcg step's Jacobians under ``vmap`` over envs (one key for every env)."""
    return jax.jit(jax.vmap(env.stepper().jacobians, in_axes=(0, 0, None, 0)))


def _boxpush_batch(env, n, hits):
    """``n`` BoxPush states; in those where ``hits`` is True the pusher strikes the box at
    1.5 m/s."""
    states = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), n))
    q, v = states.data.qpos, states.data.qvel
    d = q[:, 2:4] - q[:, 0:2]
    u = d / jnp.linalg.norm(d, axis=1, keepdims=True)
    hit = jnp.asarray(hits)[:, None]
    q = q.at[:, 0:2].set(jnp.where(hit, q[:, 2:4] - 0.065 * u, q[:, 0:2]))
    v = v.at[:, 0:2].set(jnp.where(hit, 1.5 * u, v[:, 0:2]))
    return states.data.replace(qpos=q, qvel=v)


def test_bcg_chunk_is_an_eighth_of_the_batch():
    assert [bcg_chunk(n) for n in (1, 8, 9, 16, 64)] == [1, 1, 2, 2, 8]


@pytest.mark.integration
@pytest.mark.parametrize(
    "hits",
    [
        [True, False, True, False],  # half the batch: two passes of one env (chunk of 1)
        [True, True, False, True],  # most of it: three passes
    ],
)
def test_batched_bcg_jacobians_match_the_unbatched_step_env_by_env(env, batched_jacobians, hits):
    n = len(hits)
    data = _boxpush_batch(env, n, hits)
    stepper = env.stepper()
    actions = jnp.zeros((n, 2))
    key = jax.random.PRNGKey(3)  # one key for every env: an unbatched argument of the rule
    window = jnp.zeros((n,), jnp.int32)
    (_, _, trigger), (A, B), stats = batched_jacobians(data, actions, key, window)
    assert np.asarray(trigger).tolist() == hits
    for i in range(n):
        (_, _, trig_i), (A_i, B_i), stats_i = stepper.jacobians(
            jax.tree.map(lambda x: x[i], data), actions[i], key, window[i]
        )
        assert bool(trig_i) == bool(trigger[i])
        # Equal up to float32 round-off, which depends on the batch shape and the compiled
        # kernels' threading (amplified where the impact makes entries ~10^2): relative to
        # each Jacobian's norm. bundle_valid below tells a bundle from exact Jacobians.
        assert np.linalg.norm(A[i] - A_i) <= 1e-3 * np.linalg.norm(A_i)
        assert np.linalg.norm(B[i] - B_i) <= 1e-3 * np.linalg.norm(B_i)
        assert int(stats["bundle_valid"][i]) == int(stats_i["bundle_valid"])
    # A bundle (10 branches) where the pusher strikes the box, exact Jacobians elsewhere.
    assert np.asarray(stats["bundle_valid"]).tolist() == [10 if h else 1 for h in hits]
    assert np.all(np.isfinite(A)) and np.all(np.isfinite(B))


# ----- the reverse-mode backward pass against transposed Jacobians -------------------------
# DifferentiableStep's backward pass (what jax.grad, the vector envs and SHAC use) pulls
# cotangents back with VJPs and never forms (A, B). Reference: the step's Jacobians from
# ``stepper.jacobians`` (forward mode, checked against MuJoCo C finite differences
# elsewhere), transposed here by hand, through the tangent charts where qpos has quaternions.
#: Relative to each state's cotangent norm: float32 round-off of two summation orders,
#: amplified where an impact makes Jacobian entries ~1e2.
RTOL = 1e-4


def _step_vjp(env, estimator, batched):
    """Jitted ``(data, action, key, window, g) -> cotangents of (qpos, qvel, act, action)``
    of one differentiable step, for ``g`` on the next (qpos, qvel, act)."""
    stepper = env.stepper(estimator)

    def vjp(data, action, key, window, g):
        def out(qpos, qvel, act, a):
            nxt = stepper(data.replace(qpos=qpos, qvel=qvel, act=act), a, key, window).data
            return nxt.qpos, nxt.qvel, nxt.act

        return jax.vjp(out, data.qpos, data.qvel, data.act, action)[1](g)

    return jax.jit(jax.vmap(vjp, in_axes=(0, 0, None, 0, 0)) if batched else vjp)


def _transposed(env, A, B, qpos0, qpos1, g):
    """The reference: ``A^T``, ``B^T`` applied to ``g`` in tangent coordinates, with qpos
    cotangents mapped through ``integrate_pos`` at ``qpos1`` and ``difference_pos`` at
    ``qpos0`` (identities without quaternions)."""
    from bcg_envs.physics import tangent

    m, nv = env.mj_model, env.mj_model.nv
    J_int = jax.jacfwd(lambda v: tangent.integrate_pos(m, qpos1, v))(jnp.zeros(nv))
    g_y = jnp.concatenate([J_int.T @ g[0], g[1], g[2]])
    g_x = A.T @ g_y
    J_diff = jax.jacfwd(lambda q: tangent.difference_pos(m, q, qpos0))(qpos0)
    return J_diff.T @ g_x[:nv], g_x[nv : 2 * nv], g_x[2 * nv :], B.T @ g_y


def _cotangents(data, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.normal(size=x.shape), jnp.float32) for x in (data.qpos, data.qvel, data.act))


def _assert_close(got, want):
    for a, b in zip(got, want):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        assert np.isfinite(a).all()
        err, scale = np.linalg.norm(a - b), np.linalg.norm(b)
        assert err <= RTOL * max(scale, 1e-6), (err, scale)


def _row(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


@pytest.mark.integration
def test_bcg_vjp_equals_transposed_jacobians_batched_and_unbatched(env, batched_jacobians):
    """Struck and untouched boxes in one batch: the batched rule bundles the struck ones'
    VJPs (mean over branches) and gives the others exact VJPs, as the Jacobians do (the
    untouched ones from the linearization the forward pass kept)."""
    hits = [True, False, True, False]
    n = len(hits)
    data = _boxpush_batch(env, n, hits)
    actions, key, window = jnp.zeros((n, 2)), jax.random.PRNGKey(3), jnp.zeros((n,), jnp.int32)
    assert env.stepper("bcg").keeps_linearization(_row(data, 0), actions[0])
    g = _cotangents(data)
    (nxt, _, trigger), (A, B), _ = batched_jacobians(data, actions, key, window)
    assert np.asarray(trigger).tolist() == hits
    got = _step_vjp(env, "bcg", batched=True)(data, actions, key, window, g)
    single = _step_vjp(env, "bcg", batched=False)
    for i in range(n):
        want = _transposed(env, A[i], B[i], data.qpos[i], nxt.qpos[i], _row(g, i))
        _assert_close(_row(got, i), want)
        if i < 2:  # unbatched: the lax.cond path, a strike and an untouched box
            _assert_close(single(_row(data, i), actions[i], key, window[i], _row(g, i)), want)


@pytest.mark.long  # exact VJPs are also checked by default: the untouched boxes of the bcg test, the free joint
def test_exact_vjp_equals_transposed_jacobians_and_is_finite_at_1000_states(env):
    """Exact VJPs at 8 states (half of them strikes) against transposed Jacobians; then
    the same compiled VJP at 1,000 reset states with random actions, 8 at a time."""
    n = 8
    data = _boxpush_batch(env, n, [i % 2 == 0 for i in range(n)])
    rng = np.random.default_rng(0)
    actions = jnp.asarray(rng.uniform(-1, 1, (n, 2)), jnp.float32)
    key, window, g = jax.random.PRNGKey(0), jnp.zeros((n,), jnp.int32), _cotangents(data)
    vjp = _step_vjp(env, "exact", batched=True)
    jac = jax.jit(jax.vmap(env.stepper("exact").jacobians, in_axes=(0, 0, None, 0)))
    (nxt, _, _), (A, B), _ = jac(data, actions, key, window)
    got = vjp(data, actions, key, window, g)
    for i in range(n):
        _assert_close(_row(got, i), _transposed(env, A[i], B[i], data.qpos[i], nxt.qpos[i], _row(g, i)))
    reset = jax.jit(jax.vmap(env.reset))
    for batch in range(125):
        states = reset(jax.random.split(jax.random.PRNGKey(100 + batch), n)).data
        acts = jnp.asarray(rng.uniform(-1, 1, (n, 2)), jnp.float32)
        out = vjp(states, acts, key, window, _cotangents(states, batch))
        assert all(np.isfinite(np.asarray(x)).all() for x in out), batch


FREE_BODY_XML = """
<mujoco>
  <option timestep="0.004" solver="Newton" iterations="20" ls_iterations="10"/>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="puck" pos="0 0 0.06">
      <freejoint/>
      <geom type="box" size="0.05 0.05 0.05" mass="0.5"/>
      <body name="arm" pos="0.05 0 0">
        <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.08 0 0" size="0.01" mass="0.05"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="0.5"/></actuator>
</mujoco>
"""


@pytest.fixture(scope="module")
def free_body_env(make_toy_env):
    """A box on a free joint (quaternion qpos, as G1's floating base) resting on a floor,
    with one motor-driven arm: the cheap model for the tangent-chart checks."""

    def initial_state(key):
        k1, k2 = jax.random.split(key)
        axis = jax.random.normal(k1, (3,))
        angle = 0.2 * jax.random.uniform(k2, ())
        quat = jnp.concatenate([jnp.cos(angle / 2)[None], jnp.sin(angle / 2) * axis / jnp.linalg.norm(axis)])
        qpos = jnp.concatenate([jnp.array([0.0, 0.0, 0.052]), quat, jnp.zeros(1)])
        return qpos, 0.3 * jax.random.normal(jax.random.fold_in(key, 1), (7,))

    return make_toy_env(
        FREE_BODY_XML, ctrl_dt=0.02, initial_state=initial_state, force_threshold=2.0, estimator="exact"
    )


@pytest.mark.integration
@pytest.mark.parametrize("estimator", ["exact", pytest.param("bcg", marks=pytest.mark.long)])
def test_free_joint_vjp_equals_transposed_jacobians(free_body_env, estimator):
    """Quaternion qpos: cotangents go through the tangent charts the same way in both
    backward passes, at states where the box lands on its edges (bcg bundles there)."""
    env = free_body_env
    n = 4
    data = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), n)).data
    data = data.replace(qvel=data.qvel.at[:, 2].set(-1.0))  # falling onto the floor
    actions = jnp.linspace(-1.0, 1.0, n)[:, None]
    key, window, g = jax.random.PRNGKey(1), jnp.zeros((n,), jnp.int32), _cotangents(data)
    stepper = env.stepper(estimator)
    vjp = _step_vjp(env, estimator, batched=False)
    bundled = 0
    for i in range(n):
        args = (_row(data, i), actions[i], key, window[i])
        (nxt, _, trigger), (A, B), _ = stepper.jacobians(*args)
        bundled += int(trigger)
        got = vjp(*args, _row(g, i))
        _assert_close(got, _transposed(env, A, B, data.qpos[i], nxt.qpos, _row(g, i)))
        assert np.abs(np.asarray(got[0][3:7])).max() > 0  # the orientation gets a cotangent
    if estimator == "bcg":
        assert bundled > 0


@pytest.mark.long  # both paths are checked against transposed Jacobians by the VJP tests above
def test_exact_backward_pass_is_the_same_from_a_kept_or_a_recomputed_linearization(free_body_env, monkeypatch):
    """``exact`` keeps a small step's linearization from the forward pass; with a zero
    budget it recomputes the step in the backward pass. Both equal the transposed
    Jacobians (quaternion qpos, a landing box)."""
    from bcg_envs.gradients import differentiable_step

    env = free_body_env
    n = 3
    data = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(3), n)).data
    data = data.replace(qvel=data.qvel.at[:, 2].set(-1.0))
    actions = jnp.linspace(-1.0, 1.0, n)[:, None]
    key, window, g = jax.random.PRNGKey(1), jnp.zeros((n,), jnp.int32), _cotangents(data)
    stepper = env.stepper("exact")
    assert stepper.keeps_linearization(_row(data, 0), actions[0])
    kept = _step_vjp(env, "exact", batched=True)(data, actions, key, window, g)
    monkeypatch.setattr(differentiable_step, "LINEARIZATION_BUDGET", 0)
    assert not stepper.keeps_linearization(_row(data, 0), actions[0])
    recomputed = _step_vjp(env, "exact", batched=True)(data, actions, key, window, g)
    for i in range(n):
        args = (_row(data, i), actions[i], key, window[i])
        (nxt, _, _), (A, B), _ = stepper.jacobians(*args)
        want = _transposed(env, A, B, data.qpos[i], nxt.qpos, _row(g, i))
        _assert_close(_row(kept, i), want)
        _assert_close(_row(recomputed, i), want)


@pytest.mark.parametrize("space", ["cartesian", "joint"])
def test_contact_perturbations_leave_the_floating_base_alone(free_body_env, space):
    """A contact on the arm of the free-floating box: bcg's perturbations move the arm's
    hinge only (the base is the whole body), unless ``perturb_base=True``."""
    from bcg_envs import BundleConfig
    from bcg_envs.gradients.perturbations import contact_sampler, floating_base_dofs

    env = free_body_env
    nv, nx = env.mj_model.nv, env.state_size
    base = floating_base_dofs(env.mj_model)
    assert base.tolist() == [True] * 6 + [False]
    # The arm tip's contact Jacobian moves both the base (6 dofs) and the hinge.
    J = jnp.asarray(np.random.default_rng(0).normal(size=(3, nv)), jnp.float32)
    active = jnp.ones((1,), bool)
    for perturb_base, moved in ((False, ~base), (True, np.ones(nv, bool))):
        cfg = BundleConfig(space=space, perturb_base=perturb_base)
        sample = contact_sampler(J, active, nx, nv, 1, cfg, None if perturb_base else ~base)
        dx, _ = jax.vmap(sample)(jax.random.split(jax.random.PRNGKey(0), 16))
        dx = np.asarray(dx)
        assert np.all(dx[:, :nv][:, ~moved] == 0) and np.all(dx[:, nv : 2 * nv][:, ~moved] == 0)
        assert np.abs(dx[:, :nv][:, moved]).min() > 0


@pytest.mark.long
@pytest.mark.parametrize("env_id", ["BoxPush-v0", "PlanarHand-v0"])
@pytest.mark.parametrize("estimator", ["exact", "bundle", "zeroth", "bcg", "alpha"])
def test_every_estimator_vjp_equals_transposed_jacobians(env_id, estimator):
    """Every (env, estimator): batched VJPs at 6 states of a random-action rollout against
    the transposed Jacobians of the same step (same key, so the same branches)."""
    env = bcg_envs.make_jax(env_id)
    n = 6
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(2), n))
    step = jax.jit(jax.vmap(env.step))
    rng = np.random.default_rng(1)
    for _ in range(10):  # into contact: random pushes / finger motions
        states = step(states, jnp.asarray(rng.uniform(-1, 1, (n, env.action_size)), jnp.float32))
    data, window = states.data, jnp.zeros((n,), jnp.int32)
    actions = jnp.asarray(rng.uniform(-1, 1, (n, env.action_size)), jnp.float32)
    key, g = jax.random.PRNGKey(5), _cotangents(data)
    jac = jax.jit(jax.vmap(env.stepper(estimator).jacobians, in_axes=(0, 0, None, 0)))
    (nxt, _, _), (A, B), _ = jac(data, actions, key, window)
    got = _step_vjp(env, estimator, batched=True)(data, actions, key, window, g)
    for i in range(n):
        _assert_close(_row(got, i), _transposed(env, A[i], B[i], data.qpos[i], nxt.qpos[i], _row(g, i)))


#: The unbatched bcg VJP at a strike, run in a process that may use one CPU (set before JAX
#: is imported, as ``taskset -c 0`` or a one-core cluster job would), against the same VJP
#: under ``vmap`` on a batch of one. Prints whether the step bundled and the largest
#: relative difference of the four cotangents.
_ONE_CPU_VJP = """
    import os
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import jax, jax.numpy as jnp, numpy as np
    import bcg_envs
    from bcg_envs.cpu_runtime import mlir_single_threaded
    assert mlir_single_threaded()
    env = bcg_envs.make_jax("BoxPush-v0", estimator="bcg", bundle=bcg_envs.BundleConfig(horizon=1))
    stepper = env.stepper()
    data = env.reset(jax.random.PRNGKey(0)).data
    q, v = data.qpos, data.qvel
    u = (q[2:4] - q[0:2]) / jnp.linalg.norm(q[2:4] - q[0:2])
    data = data.replace(qpos=q.at[0:2].set(q[2:4] - 0.065 * u), qvel=v.at[0:2].set(1.5 * u))
    key, window = jax.random.PRNGKey(3), jnp.int32(0)
    g = (jnp.ones_like(data.qpos), jnp.ones_like(data.qvel), jnp.ones_like(data.act))

    def vjp(data, action, window, g):
        def out(qpos, qvel, act, a):
            nxt = stepper(data.replace(qpos=qpos, qvel=qvel, act=act), a, key, window).data
            return nxt.qpos, nxt.qvel, nxt.act
        return jax.vjp(out, data.qpos, data.qvel, data.act, action)[1](g)

    bundled = jax.jit(lambda d: stepper(d, jnp.zeros(2), key, window).bundled)(data)
    one = jax.tree.map(lambda x: x[None], (data, jnp.zeros(2), window, g))
    batched = jax.block_until_ready(jax.jit(jax.vmap(vjp))(*one))
    single = jax.jit(vjp)(data, jnp.zeros(2), window, g)
    errs = [np.linalg.norm(np.asarray(a) - np.asarray(b[0])) / max(np.linalg.norm(np.asarray(b[0])), 1e-6)
            for a, b in zip(single, batched)]
    print(bool(bundled), max(errs))
"""


@pytest.mark.integration
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_unbatched_bcg_vjp_runs_in_a_process_restricted_to_one_cpu(tmp_path):
    """In a process that may use one CPU when JAX is imported, XLA mis-converts the
    ``lax.cond`` form of the unbatched bcg VJP ("untyped custom call to lapack_spotrf_ffi",
    jaxlib 0.10.2), so the step runs its batched rule on a batch of one there: the VJP runs
    and equals the same VJP under ``vmap``."""
    # No compile cache: a program compiled elsewhere would skip the conversion under test.
    out = run_fresh(_ONE_CPU_VJP, tmp_path, 900, env={"BCG_ENVS_COMPILE_CACHE": "0"})
    assert out.returncode == 0, out.stderr[-3000:]
    bundled, worst = out.stdout.split()[-2:]
    assert bundled == "True"  # the strike triggers bcg: the bundle path ran
    assert float(worst) <= RTOL


# ----- the backward pass on a toy ------------------------------------------------------------
# The checks above compile BoxPush programs (integration tier). The same mechanics on a 1-D
# ball and a wall under MuJoCo's contact, one compiled program per test: a two-step branch
# window against hand-rolled branch gradients (default tier), and bcg's batched VJP
# (bundled where the ball strikes the wall, exact where it rests against it or flies free)
# against the transposed forward-mode Jacobians (integration tier).
#: (ball centre x (m), velocity (m/s)): 2 mm from the wall at 1 m/s (the first 10 ms step
#: strikes it: tens of N), resting against it (pressed by the action: under 1 N), free.
TOY_STARTS = np.array([[0.448, 1.0], [0.45, 0.0], [0.15, 0.0]], np.float32)
TOY_ACTIONS = np.array([[0.5], [0.5], [-0.2]], np.float32)
TOY_WEIGHTS = np.array([1.0, 0.3], np.float32)  # on the final (qpos, qvel)


@pytest.fixture(scope="module")
def toy(make_toy_env):
    """``make(bundle)``: the ball-wall env, bcg triggering above 1 N, 5 physics substeps
    per control step. Slide joint: tangent coordinates are (q, v) themselves."""

    def make(bundle):
        return make_toy_env(
            BALL_XML,
            ctrl_dt=0.01,
            initial_state=lambda key: (jnp.zeros(1), jnp.zeros(1)),
            force_threshold=1.0,
            estimator="bcg",
            bundle=bundle,
        )

    return make


def _toy_data(env, start):
    return env.state_from(start[:1], start[1:], None, {}, jax.random.PRNGKey(0)).data


@pytest.mark.integration  # ~70 s of compile; the two-step window below keeps bcg's VJP in the default tier
def test_toy_bcg_step_vjp_is_its_jacobians_transposed(toy):
    """One-step bcg, batched: the VJP of the strike is the transposed bundle (the mean of
    10 branches' Jacobians), those of the resting and the free ball the transposed exact
    Jacobians (through the contact solve for the resting one)."""
    env = toy(bcg_envs.BundleConfig(horizon=1))
    bcg = env.stepper()
    key, g = jax.random.PRNGKey(3), jnp.asarray([1.0, 0.5], np.float32)

    def one(start, action):
        data, window = _toy_data(env, start), jnp.zeros((), jnp.int32)

        def out(x, a):
            nxt = bcg(data.replace(qpos=x[:1], qvel=x[1:]), a, key, window).data
            return jnp.concatenate([nxt.qpos, nxt.qvel])

        vjp = jax.vjp(out, start, action)[1](g)
        (_, report, trigger), (A, B), stats = bcg.jacobians(data, action, key, window)
        return vjp, (A, B), trigger, stats["bundle_valid"], jnp.max(report.force)

    (gx, ga), (A, B), trigger, valid, force = jax.jit(jax.vmap(one))(jnp.asarray(TOY_STARTS), jnp.asarray(TOY_ACTIONS))
    assert np.asarray(trigger).tolist() == [True, False, False]
    assert np.asarray(valid).tolist() == [10, 1, 1]
    assert float(force[0]) > 10.0 and 0.0 < float(force[1]) < 1.0 and float(force[2]) == 0.0
    for i in range(3):
        np.testing.assert_allclose(np.asarray(gx[i]), np.asarray(A[i]).T @ np.asarray(g), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(np.asarray(ga[i]), np.asarray(B[i]).T @ np.asarray(g), rtol=1e-4, atol=1e-6)


def test_toy_bcg_two_step_window_is_the_mean_of_branch_gradients(toy):
    """bcg with H = 2 through ``env.step``: the strike's two-step rollout gradient is the
    mean over its branches of the exact two-step gradients at the same perturbations (drawn
    with the key ``env.step`` hands the first step); the free ball's is exact (its
    "branches" here roll from zero offsets)."""
    env = toy(bcg_envs.BundleConfig(horizon=2))
    stepper, physics = env.stepper(), env.physics
    rng = jax.random.PRNGKey(7)
    _, key = jax.random.split(rng)
    actions = jnp.asarray(TOY_ACTIONS[[0, 2]])  # two control steps

    def final(d):
        return jnp.dot(TOY_WEIGHTS, jnp.concatenate([d.qpos, d.qvel]))

    def both(start):
        def body(s, a):
            s = env.step(s, a)
            return s, s.info["bundled"]

        def through_env(x0, acts):  # scans compile one step for both steps
            s, bundled = jax.lax.scan(body, env.state_from(x0[:1], x0[1:], None, {}, rng), acts)
            return final(s.data), bundled[0]

        got, bundled = jax.grad(through_env, argnums=(0, 1), has_aux=True)(start, actions)
        data0 = env.state_from(start[:1], start[1:], None, {}, rng).data
        _, contact = control_step_with_contacts(physics, data0, env.action_to_ctrl(actions[0]))
        dx, du = stepper.offsets(data0, actions[0], key, contact)
        dx, du = jnp.where(bundled, dx, 0.0), jnp.where(bundled, du, 0.0)

        def rolled(x, acts, dxb, dub):
            d = stepper.displace(data0.replace(qpos=x[:1], qvel=x[1:]), dxb)
            step = lambda d, a: (physics.control_step(d, env.action_to_ctrl(a)), None)  # noqa: E731
            return final(jax.lax.scan(step, d, acts.at[0].add(dub))[0])

        branches = jax.vmap(jax.grad(rolled, argnums=(0, 1)), in_axes=(None, None, 0, 0))(start, actions, dx, du)
        return got, bundled, jax.tree.map(lambda b: b.mean(0), branches), jnp.max(jnp.abs(dx))

    starts = jnp.asarray(TOY_STARTS[[0, 2]])
    got, bundled, want, offset = jax.jit(jax.vmap(both))(starts)
    assert np.asarray(bundled).tolist() == [True, False]  # the strike opens a window (its second step inside)
    assert float(offset[0]) > 1e-3  # the strike's branches are perturbed (sigma: 1 cm, 2 cm/s)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
