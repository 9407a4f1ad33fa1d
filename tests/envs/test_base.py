"""``bcg_envs.envs.base`` helpers shared by both backends."""

import jax
import numpy as np

from bcg_envs.envs.base import reset_key


def test_reset_key_is_jax_prng_key_of_the_drawn_seed():
    """The NumPy-built key equals ``jax.random.PRNGKey`` of the seed the generator draws."""
    for seed in (0, 1, 7, 12345):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(5):
            key = reset_key(a)
            expected = jax.random.PRNGKey(int(b.integers(0, 2**31 - 1)))
            assert isinstance(key, np.ndarray) and key.dtype == np.uint32
            np.testing.assert_array_equal(key, np.asarray(expected))
            np.testing.assert_array_equal(
                np.asarray(jax.random.uniform(key, (3,))), np.asarray(jax.random.uniform(expected, (3,)))
            )


def test_reset_key_defers_to_jax_for_other_key_implementations():
    with jax.default_prng_impl("rbg"):
        a, b = np.random.default_rng(3), np.random.default_rng(3)
        key = reset_key(a)
        expected = jax.random.PRNGKey(int(b.integers(0, 2**31 - 1)))
        assert key.shape == expected.shape != (2,)
        np.testing.assert_array_equal(np.asarray(key), np.asarray(expected))
