"""The divergence check (``bcg_envs.physics.divergence``): NumPy and JAX agree, batched over
leading axes, on finite, NaN, inf and over-limit states, and the MuJoCo C hot path's
list variant agrees with both."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg_envs.physics.divergence import MAX_QVEL, diverged, diverged_lists

NAN, INF = float("nan"), float("inf")
# (qpos, qvel, act, diverged); values exact in float32, so that JAX's float32 agrees.
CASES = {
    "finite": ([0.1, -2.0, 3.0], [0.0, 1.5, -999.0], [0.5], False),
    "qpos nan": ([0.1, NAN, 3.0], [0.0, 1.5, 2.0], [0.5], True),
    "qpos inf": ([0.1, -INF, 3.0], [0.0, 1.5, 2.0], [0.5], True),
    "qvel nan": ([0.1, 0.2, 3.0], [NAN, 1.5, 2.0], [0.5], True),
    "qvel inf": ([0.1, 0.2, 3.0], [0.0, INF, 2.0], [0.5], True),
    "qvel -inf": ([0.1, 0.2, 3.0], [0.0, 1.5, -INF], [0.5], True),
    "qvel at limit": ([0.1, 0.2, 3.0], [0.0, MAX_QVEL, 2.0], [0.5], True),
    "qvel -limit": ([0.1, 0.2, 3.0], [0.0, 1.5, -MAX_QVEL], [0.5], True),
    "qvel over limit": ([0.1, 0.2, 3.0], [0.0, 1.5, 2.5e3], [0.5], True),
    "qvel huge": ([0.1, 0.2, 3.0], [1e11, 1.5, 2.0], [0.5], True),
    "qpos large": ([1e9, 0.2, 3.0], [0.0, 1.5, 2.0], [0.5], False),  # positions have no limit
    "act nan": ([0.1, 0.2, 3.0], [0.0, 1.5, 2.0], [NAN], True),
    "act inf": ([0.1, 0.2, 3.0], [0.0, 1.5, 2.0], [INF], True),
}


def _arrays():
    qpos, qvel, act, expected = (np.array([c[i] for c in CASES.values()]) for i in range(4))
    return qpos, qvel, act, expected


def test_numpy_jax_and_lists_agree_case_by_case():
    qpos, qvel, act, expected = _arrays()
    np.testing.assert_array_equal(diverged(qpos, qvel, act), expected)
    jitted = jax.jit(lambda q, v, a: diverged(q, v, a, xp=jnp))
    got = jitted(*(jnp.asarray(x, jnp.float32) for x in (qpos, qvel, act)))
    np.testing.assert_array_equal(np.asarray(got), expected)
    for name, (q, v, a, want) in CASES.items():
        assert diverged_lists(q, v, a) is want, name
        assert bool(diverged(np.array(q), np.array(v), np.array(a))) is want, name


def test_batched_over_leading_axes_and_optional_act():
    qpos, qvel, act, expected = _arrays()
    n = len(expected) - 1  # an even number of cases, reshaped to (2, n / 2)
    shape = (2, n // 2)
    got = diverged(*(x[:n].reshape(shape + (-1,)) for x in (qpos, qvel, act)))
    np.testing.assert_array_equal(got, expected[:n].reshape(shape))
    # without act (a model with no activations), and with none of a kind (nv = 0, na = 0)
    no_act = np.array([("act" not in k) and c[3] for k, c in CASES.items()])
    np.testing.assert_array_equal(diverged(qpos, qvel), no_act)
    np.testing.assert_array_equal(diverged(qpos, qvel, np.zeros((len(CASES), 0))), no_act)
    assert not diverged(np.zeros(2), np.zeros(0)) and not diverged_lists([0.0, 0.0], [])
    assert diverged(np.array([NAN]), np.zeros(0)) and diverged_lists([NAN], [])


@pytest.mark.parametrize("value", [NAN, INF, MAX_QVEL])
def test_jax_check_of_a_batch_flags_only_the_bad_state(value):
    qvel = jnp.zeros((4, 3)).at[2, 1].set(value)
    got = diverged(jnp.zeros((4, 5)), qvel, jnp.zeros((4, 0)), xp=jnp)
    np.testing.assert_array_equal(np.asarray(got), [False, False, True, False])
