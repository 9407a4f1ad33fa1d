"""Bundles on 1-D toys with known Gaussian-smoothed derivatives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from bcg_envs.gradients import estimators
from bcg_envs.gradients.perturbations import global_sampler

SIGMA = 0.3
N = 4000


def _offsets(seed, n=N, antithetic=False):
    sampler = global_sampler(jnp.array([SIGMA, SIGMA], jnp.float32), 1)
    return estimators.sample_offsets(sampler, jax.random.PRNGKey(seed), n, antithetic)


@pytest.mark.parametrize("x0", [-0.2, 0.0, 0.35])
def test_first_order_bundle_of_relu_matches_gaussian_cdf(x0):
    # d/dx E[relu(x + w)] = Phi(x / sigma); u enters with weight 0.5.
    f = lambda dx, du: jnp.maximum(x0 + dx + 0.5 * du, 0.0)
    dx, du = _offsets(0)
    A, B, stats = estimators.first_order_bundle(f, dx, du)
    s = np.sqrt(SIGMA**2 * (1 + 0.25))
    expected = norm.cdf(x0 / s)
    per_sample = np.asarray((x0 + dx + 0.5 * du) > 0, float)
    se = per_sample.std() / np.sqrt(N)
    assert abs(float(A[0, 0]) - expected) < 3 * se + 1e-6
    assert abs(float(B[0, 0]) - 0.5 * expected) < 3 * 0.5 * se + 1e-6
    assert int(stats["bundle_dropped"]) == 0


@pytest.mark.parametrize("x0", [-0.2, 0.1])
def test_zeroth_order_bundle_of_step_matches_gaussian_pdf(x0):
    # The exact derivative of a step is 0 almost everywhere (first order is biased);
    # the smoothed derivative is phi(x / sigma) / sigma, which zeroth order recovers.
    f = lambda dx, du: jnp.where(x0 + dx > 0, 1.0, 0.0) + 0.0 * du
    dx, du = _offsets(1)
    sigma = jnp.array([SIGMA, SIGMA])
    A, _, _ = estimators.zeroth_order_bundle(f, dx, du, sigma)
    expected = norm.pdf(x0 / SIGMA) / SIGMA
    # Standard error of the least-squares slope ~ residual std / (sigma sqrt(N)).
    step = np.asarray(x0 + dx[:, 0] > 0, float)
    se = step.std() / (SIGMA * np.sqrt(N))
    assert abs(float(A[0, 0]) - expected) < 3 * se
    A1, _, _ = estimators.first_order_bundle(f, dx, du)
    assert float(A1[0, 0]) == 0.0  # first order misses the jump entirely


def test_alpha_order_prefers_first_order_for_smooth_and_zeroth_for_jumps():
    dx, du = _offsets(2, n=400)
    sigma = jnp.array([SIGMA, SIGMA])
    smooth = lambda dx, du: jnp.sin(1.0 + dx) + du
    *_, stats_smooth = estimators.alpha_order_bundle(smooth, dx, du, sigma)
    assert float(stats_smooth["alpha"]) > 0.9
    # A stiff, steep function: first-order samples vary wildly, so alpha moves toward zeroth.
    stiff = lambda dx, du: 50.0 * jnp.tanh(40.0 * dx) + 0.0 * du
    A, _, stats_stiff = estimators.alpha_order_bundle(stiff, dx, du, sigma)
    assert float(stats_stiff["alpha"]) < float(stats_smooth["alpha"])
    assert np.isfinite(np.asarray(A)).all()


def test_non_finite_branches_are_dropped_and_counted():
    f = lambda dx, du: jnp.where(dx > 0.4, jnp.nan, 2.0 * dx) + du
    dx, du = _offsets(3, n=200)
    A, B, stats = estimators.first_order_bundle(f, dx, du)
    dropped = int(np.sum(np.asarray(dx[:, 0]) > 0.4))
    assert dropped > 0
    assert int(stats["bundle_dropped"]) == dropped
    assert np.allclose(np.asarray(A), 2.0) and np.allclose(np.asarray(B), 1.0)


def test_antithetic_offsets_come_in_pairs():
    dx, du = _offsets(4, n=10, antithetic=True)
    assert np.allclose(np.asarray(dx[:5]), -np.asarray(dx[5:]))
