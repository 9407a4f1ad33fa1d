"""Functional JAX API: jax.grad through rollouts for every estimator, Brax compatibility."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg_envs
from bcg_envs import ESTIMATORS


def _rollout_return(env):
    """``ret(actions, state) -> (return, whether a step diverged)``."""

    def ret(actions, state):
        def body(s, a):
            s = env.step(s, a)
            return s, (s.reward * (1.0 - s.done), s.info["sim_diverged"])

        _, (rewards, diverged) = jax.lax.scan(body, state, actions)
        return jnp.sum(rewards), jnp.any(diverged)

    return ret


# Each estimator is a separate 2-4 minute compile on 2 cores: exact in the integration
# tier, the other four in the long tier. bcg's batched backward pass is also checked in the
# integration tier elsewhere: its Jacobians env by env against the unbatched step
# (tests/gradients/test_differentiable_step.py) and SHAC training through it
# (tests/baselines/test_runners.py).
_FAST = ("exact",)
_HORIZON, _BATCH = 32, 20


@functools.lru_cache(maxsize=None)
def _batched_rollout(estimator):
    """``(env, value_and_grad, plain)`` of the 32-step return, vmapped over 20 envs and
    compiled once per estimator for every test in this module."""
    env = bcg_envs.make_jax("BoxPush-v0", estimator=estimator)
    ret = _rollout_return(env)
    return env, jax.jit(jax.vmap(jax.value_and_grad(ret, has_aux=True))), jax.jit(jax.vmap(ret))


def _states_and_actions(env):
    states = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), _BATCH))
    # Drive the pusher at the box so that most rollouts go through contact.
    to_box = states.data.qpos[:, 2:4] - states.data.qpos[:, 0:2]
    actions = jnp.clip(3.0 * to_box, -1, 1)[:, None, :] * jnp.ones((1, _HORIZON, 1))
    return states, actions


def _check_rollout_gradients(estimator, states, actions):
    _, grad_fn, plain_fn = _batched_rollout(estimator)
    (values, diverged), grads = grad_fn(actions, states)
    grads = np.asarray(grads)
    assert np.isfinite(grads).all(), f"{estimator}: non-finite gradient in {np.sum(~np.isfinite(grads))} entries"
    assert np.isfinite(np.asarray(values)).all()
    assert np.abs(grads).max() > 0  # the gradient actually flows
    # Gradient mode does not change values: the primal return equals a plain rollout's.
    plain, plain_diverged = plain_fn(actions, states)
    np.testing.assert_allclose(np.asarray(values), np.asarray(plain), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(diverged), np.asarray(plain_diverged))
    return grads, np.asarray(diverged)


@pytest.mark.integration
@pytest.mark.parametrize(
    "estimator", [e if e in _FAST else pytest.param(e, marks=pytest.mark.long) for e in ESTIMATORS]
)
def test_grad_through_32_step_rollout_is_finite(estimator):
    env, _, _ = _batched_rollout(estimator)
    assert env.mj_model.opt.iterations > 1  # the accurate solver, not iterations = 1
    states, actions = _states_and_actions(env)
    _, diverged = _check_rollout_gradients(estimator, states, actions)
    assert not diverged.any()


@pytest.mark.integration
def test_grad_through_a_diverging_step_is_finite():
    """A step that diverges reverts its state and ends the episode; the gradient of a
    rollout through it stays finite (a non-finite Jacobian is zeroed, not multiplied by 0)."""
    env, _, _ = _batched_rollout("exact")
    states, actions = _states_and_actions(env)
    # Env 0 starts with its box spinning at 5e4 rad/s: the simulation diverges.
    states = states.replace(data=states.data.replace(qvel=states.data.qvel.at[0, 4].set(5e4)))
    grads, diverged = _check_rollout_gradients("exact", states, actions)
    assert diverged.tolist() == [True] + [False] * (_BATCH - 1)
    assert np.abs(grads[1:]).max() > 0


def test_state_layout_and_sizes():
    env = bcg_envs.make_jax("BoxPush-v0")
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))  # eager: 3x the compile of one jitted reset
    assert state.obs.shape == (env.observation_size,)
    assert env.action_size == 2 and env.dt == pytest.approx(0.04)
    assert state.pipeline_state is state.data
    assert state.replace(pipeline_state=state.data).data is state.data
    for key in ("bundled", "sim_diverged", "truncated", "goal"):
        assert key in state.info
