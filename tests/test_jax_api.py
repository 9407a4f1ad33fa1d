"""Functional JAX API: jax.grad through rollouts for every estimator, Brax compatibility."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg_envs
from bcg_envs import ESTIMATORS


def _rollout_return(env, horizon):
    def ret(actions, state):
        def body(s, a):
            s = env.step(s, a)
            return s, s.reward * (1.0 - s.done)

        _, rewards = jax.lax.scan(body, state, actions)
        return jnp.sum(rewards)

    return ret


# Each estimator is a separate ~1-2 minute compile on 2 cores: exact and bcg by default,
# all five with BCG_SLOW=1.
_FAST = ("exact", "bcg")


@pytest.mark.parametrize(
    "estimator", [e if e in _FAST else pytest.param(e, marks=pytest.mark.slow) for e in ESTIMATORS]
)
def test_grad_through_32_step_rollout_is_finite(estimator):
    env = bcg_envs.make_jax("BoxPush-v0", estimator=estimator)
    assert env.mj_model.opt.iterations > 1  # the accurate solver, not iterations = 1
    keys = jax.random.split(jax.random.PRNGKey(0), 20)
    states = jax.vmap(env.reset)(keys)
    # Drive the pusher at the box so that most rollouts go through contact.
    to_box = states.data.qpos[:, 2:4] - states.data.qpos[:, 0:2]
    actions = jnp.clip(3.0 * to_box, -1, 1)[:, None, :] * jnp.ones((1, 32, 1))
    grad_fn = jax.jit(jax.vmap(jax.value_and_grad(_rollout_return(env, 32))))
    values, grads = grad_fn(actions, states)
    grads = np.asarray(grads)
    assert np.isfinite(grads).all(), f"{estimator}: non-finite gradient in {np.sum(~np.isfinite(grads))} entries"
    assert np.isfinite(np.asarray(values)).all()
    assert np.abs(grads).max() > 0  # the gradient actually flows
    # Gradient mode does not change values: the primal return equals a plain rollout's.
    plain = jax.jit(jax.vmap(_rollout_return(env, 32)))(actions, states)
    np.testing.assert_allclose(np.asarray(values), np.asarray(plain), rtol=1e-5, atol=1e-5)


def test_grad_through_a_diverging_step_is_finite():
    """A step that diverges reverts its state and ends the episode; the gradient of a
    rollout through it stays finite (a non-finite Jacobian is zeroed, not multiplied by 0)."""
    env = bcg_envs.make_jax("BoxPush-v0", estimator="exact")
    state = env.reset(jax.random.PRNGKey(0))
    state = env.state_from(state.data.qpos, jnp.array([0.0, 0.0, 0.0, 0.0, 5e4]), None, {"goal": state.info["goal"], "goal_yaw": state.info["goal_yaw"]}, state.info["rng"])
    value, grad = jax.jit(jax.value_and_grad(_rollout_return(env, 3)))(jnp.full((3, 2), 0.5), state)
    assert np.isfinite(float(value)) and np.isfinite(np.asarray(grad)).all()
    assert bool(env.step(state, jnp.zeros(2)).info["sim_diverged"])


def test_state_layout_and_sizes():
    env = bcg_envs.make_jax("BoxPush-v0")
    state = env.reset(jax.random.PRNGKey(0))
    assert state.obs.shape == (env.observation_size,)
    assert env.action_size == 2 and env.dt == pytest.approx(0.04)
    assert state.pipeline_state is state.data
    assert state.replace(pipeline_state=state.data).data is state.data
    for key in ("bundled", "sim_diverged", "truncated", "goal"):
        assert key in state.info
