"""bcg with horizon H > 1 rolls B perturbed branches H steps under the nominal actions:
the rollout gradient through the window is the mean of the branches' products of exact
step Jacobians (checked by hand on BoxPush, under MJX's contact, the BCG authors' and our
penalty model), and ``forward="mean"`` moves the state to the branch mean."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg_envs
from bcg_envs import BundleConfig
from bcg_envs.physics.simulator import control_step_with_contacts

pytestmark = pytest.mark.integration  # every test compiles a BoxPush gradient program

# The pusher 7.8 cm behind the box centre, moving at it at 0.6 m/s, pushing: the first
# step strikes the box and triggers the bundle.
QPOS = np.array([-0.078, 0.0, 0.0, 0.0, 0.0], np.float32)
QVEL = np.array([0.6, 0.0, 0.0, 0.0, 0.0], np.float32)
ACTIONS = np.array([[0.9, 0.0], [0.8, 0.1]], np.float32)  # inside the box: clip has a 0.5 derivative at +-1
WEIGHTS = np.array([0.0, 0.0, 1.0, 0.5, 0.2, 0.0, 0.0, 0.3, 0.1, 0.05], np.float32)  # on (qpos, qvel)


def _env_and_start(bundle, **kwargs):
    env = bcg_envs.make_jax("BoxPush-v0", estimator="bcg", bundle=bundle, **kwargs)
    _, _, task_info = env.initial_state(jax.random.PRNGKey(0))
    return env, task_info


@pytest.fixture(scope="module")
def window_h2():
    return _env_and_start(BundleConfig(horizon=2))


@pytest.mark.parametrize(
    "contact",
    [
        pytest.param({}, id="mujoco"),
        # their programs compile in ~9 min of CPU each: the long tier
        pytest.param({"contact_model": "moreau", "kappa": 300.0}, id="moreau", marks=pytest.mark.long),
        pytest.param({"contact_model": "penalty", "kappa": 300.0}, id="penalty", marks=pytest.mark.long),
    ],
)
def test_h2_rollout_gradient_is_the_mean_of_hand_rolled_branch_products(window_h2, contact):
    """Batched over two starts (the strike, and the pusher at rest 30 cm away): the strike's
    gradient is the mean over branches of the hand-rolled two-step gradients, the other
    env's is the exact one (nothing triggers). Under MJX's contact (the default), the BCG
    authors' (``moreau``) and our penalty model, both at kappa 300 /m."""
    env, task_info = _env_and_start(BundleConfig(horizon=2), **contact) if contact else window_h2
    rng = jax.random.PRNGKey(7)
    far = np.concatenate([[-0.3, 0.0, 0.0, 0.0, 0.0], np.zeros(5)]).astype(np.float32)

    def through_env(x0, actions):  # a scan compiles one step for both steps
        s = env.state_from(x0[:5], x0[5:], None, task_info, rng)
        s = jax.lax.scan(lambda s, a: (env.step(s, a), None), s, actions)[0]
        return jnp.dot(WEIGHTS, jnp.concatenate([s.data.qpos, s.data.qvel])), (
            s.info["bundled"],
            s.info["bundle_window"],
        )

    x0 = jnp.asarray(np.stack([np.concatenate([QPOS, QVEL]), far]))
    grad = jax.vmap(jax.grad(through_env, argnums=(0, 1), has_aux=True), in_axes=(0, None))
    (gx, ga), (bundled, window) = jax.jit(grad)(x0, jnp.asarray(ACTIONS))
    assert np.asarray(bundled).tolist() == [True, False] and np.asarray(window).tolist() == [0, 0]

    # By hand: the same branch perturbations (the env's key for the first step), each
    # branch rolled two exact steps, the gradients averaged.
    stepper = env.stepper()
    physics = env.physics
    _, key = jax.random.split(rng)
    data0 = env.state_from(x0[0, :5], x0[0, 5:], None, task_info, rng).data
    _, contact = control_step_with_contacts(physics, data0, env.action_to_ctrl(jnp.asarray(ACTIONS[0])))
    dx, du = stepper.offsets(data0, jnp.asarray(ACTIONS[0]), key, contact)
    assert float(jnp.max(contact[0])) > stepper.config.force_threshold

    def rolled(data, x, actions, dxb, dub):  # one program for every branch and both exact rollouts
        d = stepper.displace(data.replace(qpos=x[:5], qvel=x[5:]), dxb)
        step = lambda d, a: (physics.control_step(d, env.action_to_ctrl(a)), None)  # noqa: E731
        d = jax.lax.scan(step, d, actions.at[0].add(dub))[0]
        return jnp.dot(WEIGHTS, jnp.concatenate([d.qpos, d.qvel]))

    by_branch = jax.jit(jax.vmap(jax.grad(rolled, argnums=(1, 2)), in_axes=(None, None, None, 0, 0)))
    acts = jnp.asarray(ACTIONS)
    gx_b, ga_b = by_branch(data0, x0[0], acts, dx, du)
    np.testing.assert_allclose(np.asarray(gx[0]), np.asarray(gx_b).mean(0), rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ga[0]), np.asarray(ga_b).mean(0), rtol=1e-3, atol=1e-5)
    # ... which is not the exact gradient there (the bundle smooths the strike) ...
    no_offsets = (jnp.zeros_like(dx), jnp.zeros_like(du))
    exact = by_branch(data0, x0[0], acts, *no_offsets)[0][0]
    assert not np.allclose(np.asarray(gx[0]), np.asarray(exact), rtol=1e-2)
    # ... while the env that did not trigger got its exact gradient.
    data_far = env.state_from(x0[1, :5], x0[1, 5:], None, task_info, rng).data
    gx_far, ga_far = (g[0] for g in by_branch(data_far, x0[1], acts, *no_offsets))
    np.testing.assert_allclose(np.asarray(gx[1]), np.asarray(gx_far), rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ga[1]), np.asarray(ga_far), rtol=1e-3, atol=1e-5)


def test_forward_mean_moves_the_state_to_the_branch_mean():
    env, task_info = _env_and_start(BundleConfig(horizon=3, forward="mean"))
    s = env.state_from(jnp.asarray(QPOS), jnp.asarray(QVEL), None, task_info, jax.random.PRNGKey(7))
    step = jax.jit(env.step)
    s1 = step(s, jnp.asarray(ACTIONS[0]))
    assert bool(s1.info["bundled"]) and int(s1.info["bundle_window"]) == 2
    z, valid = np.asarray(s1.info["bundle_branches"]), np.asarray(s1.info["bundle_branch_valid"])
    assert valid.all()
    np.testing.assert_allclose(np.asarray(s1.data.qpos), z[:, :5].mean(0), atol=1e-6)  # planar: no quaternion
    np.testing.assert_allclose(np.asarray(s1.data.qvel), z[:, 5:10].mean(0), atol=1e-5)
    s2 = step(s1, jnp.asarray(ACTIONS[1]))
    assert int(s2.info["bundle_window"]) == 1 and bool(s2.info["bundled"])
    s3 = step(s2, jnp.asarray(ACTIONS[1]))
    assert int(s3.info["bundle_window"]) == 0 and not np.asarray(s3.info["bundle_branch_valid"]).any()


def test_a_stepper_with_another_branch_count_is_refused(window_h2):
    env, task_info = window_h2
    other = env.stepper("bcg", BundleConfig(horizon=2, num_samples=4))
    s = env.state_from(jnp.asarray(QPOS), jnp.asarray(QVEL), None, task_info, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="bundle branches"):
        env.step_with(other, s, jnp.asarray(ACTIONS[0]))


def test_branch_states_travel_only_with_a_branching_env(window_h2):
    """An env made without branch rollouts carries no branch states (its info keys match
    the MuJoCo backend's), and a branching stepper refuses its state."""
    env, task_info = window_h2
    plain = bcg_envs.make_jax("BoxPush-v0", estimator="bcg", bundle=BundleConfig(horizon=1))
    s = plain.state_from(jnp.asarray(QPOS), jnp.asarray(QVEL), None, task_info, jax.random.PRNGKey(0))
    assert "bundle_branches" not in s.info and "bundle_branch_valid" not in s.info
    with pytest.raises(ValueError, match="carries none"):
        plain.step_with(plain.stepper("bcg", BundleConfig(horizon=2)), s, jnp.asarray(ACTIONS[0]))


@pytest.mark.parametrize(
    "estimator, bundle",
    [("bcg", BundleConfig(horizon=3)), pytest.param("bcg", BundleConfig(horizon=1), marks=pytest.mark.long)],
)
def test_plain_step_has_the_values_of_the_differentiable_step(estimator, bundle):
    """``plain_step`` (what the Gymnasium envs step) reaches the same states, rewards and
    info as ``step`` through a strike that opens a bundle window, with branch rollouts
    (H = 3) and without (H = 1); only the branch entries differ (it rolls none)."""
    env = bcg_envs.make_jax("BoxPush-v0", estimator=estimator, bundle=bundle)
    _, _, task_info = env.initial_state(jax.random.PRNGKey(0))
    s = p = env.state_from(jnp.asarray(QPOS), jnp.asarray(QVEL), None, task_info, jax.random.PRNGKey(7))
    step, plain = jax.jit(env.step), jax.jit(env.plain_step)
    bundled = []
    for a in [ACTIONS[0], ACTIONS[1], ACTIONS[1], ACTIONS[0], ACTIONS[1]]:
        s, p = step(s, jnp.asarray(a)), plain(p, jnp.asarray(a))
        np.testing.assert_allclose(np.asarray(p.data.qpos), np.asarray(s.data.qpos), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(np.asarray(p.data.qvel), np.asarray(s.data.qvel), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(p.data.xpos), np.asarray(s.data.xpos), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(np.asarray(p.obs), np.asarray(s.obs), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(float(p.reward), float(s.reward), rtol=1e-6, atol=1e-6)
        assert float(p.done) == float(s.done)
        for k, v in s.info.items():
            if k not in ("bundle_branches", "bundle_branch_valid", "bundle_dropped"):
                np.testing.assert_allclose(np.asarray(p.info[k]), np.asarray(v), rtol=1e-6, atol=1e-6, err_msg=k)
        bundled.append(bool(s.info["bundled"]))
        if "bundle_branch_valid" in p.info:
            assert not np.asarray(p.info["bundle_branch_valid"]).any()
    assert bundled[0]  # the strike opened a window
