"""The batched ``bcg`` rule: bundles only for triggered envs, same Jacobians as per env."""

import jax
import jax.numpy as jnp
import numpy as np

import bcg_envs
from bcg_envs.gradients.differentiable_step import bcg_chunk


def _boxpush_batch(n):
    """``n`` BoxPush states; the even ones have the pusher striking the box at 1.5 m/s."""
    env = bcg_envs.make_jax("BoxPush-v0", estimator="bcg")
    states = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), n))
    q, v = states.data.qpos, states.data.qvel
    d = q[:, 2:4] - q[:, 0:2]
    u = d / jnp.linalg.norm(d, axis=1, keepdims=True)
    hit = (jnp.arange(n) % 2 == 0)[:, None]
    q = q.at[:, 0:2].set(jnp.where(hit, q[:, 2:4] - 0.065 * u, q[:, 0:2]))
    v = v.at[:, 0:2].set(jnp.where(hit, 1.5 * u, v[:, 0:2]))
    return env, states.data.replace(qpos=q, qvel=v)


def test_bcg_chunk_is_an_eighth_of_the_batch():
    assert [bcg_chunk(n) for n in (1, 8, 9, 16, 64)] == [1, 1, 2, 2, 8]


def test_batched_bcg_jacobians_match_the_unbatched_step_env_by_env():
    n = 4  # chunk of 1: the two triggered envs take two passes of the bundle loop
    env, data = _boxpush_batch(n)
    stepper = env.stepper()
    actions = jnp.zeros((n, 2))
    key = jax.random.PRNGKey(3)  # one key for every env: an unbatched argument of the rule
    window = jnp.zeros((n,), jnp.int32)
    batched = jax.jit(jax.vmap(stepper.jacobians, in_axes=(0, 0, None, 0)))
    (_, _, trigger), (A, B), stats = batched(data, actions, key, window)
    assert np.asarray(trigger).tolist() == [True, False, True, False]
    for i in range(n):
        (_, _, trig_i), (A_i, B_i), stats_i = stepper.jacobians(jax.tree.map(lambda x: x[i], data), actions[i], key, window[i])
        assert bool(trig_i) == bool(trigger[i])
        np.testing.assert_allclose(A[i], A_i, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(B[i], B_i, rtol=1e-5, atol=1e-6)
        assert int(stats["bundle_valid"][i]) == int(stats_i["bundle_valid"])
    # A bundle (10 branches) where the pusher strikes the box, exact Jacobians elsewhere.
    assert np.asarray(stats["bundle_valid"]).tolist() == [10, 1, 10, 1]
    assert np.all(np.isfinite(A)) and np.all(np.isfinite(B))
