"""The batched ``bcg`` rule: bundles only for triggered envs, same Jacobians as per env."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg_envs
from bcg_envs.gradients.differentiable_step import bcg_chunk


@pytest.fixture(scope="module")
def env():
    """One env for the module, so that its step programs are traced and compiled once: a
    fresh env's batched bcg program lowers to differently numbered MLIR, which misses the
    persistent compile cache."""
    return bcg_envs.make_jax("BoxPush-v0", estimator="bcg")


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
        (_, _, trig_i), (A_i, B_i), stats_i = stepper.jacobians(jax.tree.map(lambda x: x[i], data), actions[i], key, window[i])
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
