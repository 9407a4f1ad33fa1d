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


def _offsets_nu(seed, n, nu):
    sampler = global_sampler(jnp.full(1 + nu, SIGMA, jnp.float32), 1)
    return estimators.sample_offsets(sampler, jax.random.PRNGKey(seed), n, False)


def test_alpha_order_smooth_ridge_keeps_first_order_and_true_derivative():
    # f = sin(1 + dx + v.du): smoothed derivative cos(1) exp(-s^2 / 2) (1, v), s^2 the
    # variance of dx + v.du. With p = 20 inputs the least-squares fit pays for 20 unknowns
    # per row (s0 ~ p/2 times the curvature noise vs s1 ~ 1 times), so alpha* ~ p/(p+2);
    # both estimates agree, the bias check does not bind.
    nu, n = 19, 1000
    dx, du = _offsets_nu(5, n, nu)
    v = jnp.linspace(-0.5, 0.5, nu)
    f = lambda dx, du: jnp.sin(1.0 + dx + du @ v)
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, jnp.full(1 + nu, SIGMA))
    alpha = float(stats["alpha"])
    assert 0.85 < alpha <= 1.0
    s2 = SIGMA**2 * (1.0 + float(v @ v))
    expected = np.cos(1.0) * np.exp(-s2 / 2)
    samples = np.cos(1.0 + np.asarray(dx[:, 0] + du @ v))
    se = samples.std() / np.sqrt(n)
    assert abs(float(A[0, 0]) - expected) < 4 * se
    assert np.allclose(np.asarray(B[0]), expected * np.asarray(v), atol=4 * se)


def test_alpha_order_step_bias_check_falls_back_to_zeroth():
    # Heaviside step at the nominal point: every exact gradient is 0 (s1 = 0), so plain
    # inverse-variance weighting picks alpha* = 1 and returns 0; the smoothed derivative is
    # h phi(0) / sigma = 13.3. The robustness check (gamma = 1) sees |first - zeroth| ~ 13
    # and drives alpha to ~0.
    h = 10.0
    f = lambda dx, du: h * jnp.where(dx > 0, 1.0, 0.0) + 0.0 * du
    dx, du = _offsets(1)
    sigma = jnp.array([SIGMA, SIGMA])
    expected = h * norm.pdf(0.0) / SIGMA
    step = h * np.asarray(dx[:, 0] > 0, float)
    se = step.std() / (SIGMA * np.sqrt(N))  # of the least-squares slope
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, sigma, tolerance=1.0)
    alpha = float(stats["alpha"])
    assert alpha < 0.05
    assert abs(float(A[0, 0]) - expected) < 3 * se + alpha * expected
    assert abs(float(A[0, 0]) - expected) < 1.0  # the guarantee: within gamma
    # The choice satisfies alpha * gap + eps <= gamma.
    w = jnp.concatenate([dx, du], axis=1)
    zeroth, s0 = estimators.zeroth_order_fit(w, f(dx, du) - f(jnp.zeros(1), jnp.zeros(1)), jnp.ones(N, bool), sigma)
    gap = float(jnp.linalg.norm(zeroth))  # first = 0
    assert alpha * gap + 1.96 * np.sqrt(float(s0)) <= 1.0 + 1e-5
    # Without the check (a huge gamma): inverse-variance weighting alone returns the biased 0.
    A_ivw, _, stats_ivw = estimators.alpha_order_bundle(f, dx, du, sigma, tolerance=1e9)
    assert float(stats_ivw["alpha"]) == pytest.approx(1.0)
    assert abs(float(A_ivw[0, 0]) - expected) > 10 * se


def _smoothed_derivative(fprime, sigma, points=400_001):
    """d/dx E[f(x + w)] at 0, w ~ N(0, sigma^2): a fine trapezoid quadrature of E[f'(w)]."""
    g = np.linspace(-8 * sigma, 8 * sigma, points)
    return float(np.trapezoid(fprime(g) * norm.pdf(g, scale=sigma), g))


def test_alpha_order_stiff_tanh_moves_to_zeroth():
    # 50 tanh(40 x): smooth, so first order is unbiased, but its samples 2000 sech^2(40 w)
    # have a huge variance (s1 ~ 8x s0): alpha* ~ 0.1, and with gamma = 1 the zeroth-order
    # confidence interval (~6) already exceeds gamma, so alpha = 0.
    n = 2000
    f = lambda dx, du: 50.0 * jnp.tanh(40.0 * dx) + 0.0 * du
    dx, du = _offsets(2, n=n)
    sigma = jnp.array([SIGMA, SIGMA])
    expected = _smoothed_derivative(lambda g: 2000.0 / np.cosh(40.0 * g) ** 2, SIGMA)
    y = 50.0 * np.tanh(40.0 * np.asarray(dx[:, 0]))
    se = y.std() / (SIGMA * np.sqrt(n))
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, sigma)
    assert float(stats["alpha"]) == 0.0
    assert np.isfinite(np.asarray(A)).all() and np.isfinite(np.asarray(B)).all()
    assert abs(float(A[0, 0]) - expected) < 3 * se
    A_ivw, _, stats_ivw = estimators.alpha_order_bundle(f, dx, du, sigma, tolerance=1e9)
    assert 0.0 < float(stats_ivw["alpha"]) < 0.3
    assert abs(float(A_ivw[0, 0]) - expected) < 3 * se


def test_zeroth_order_fit_variance_matches_empirical_variance():
    # Noisy linear toy, dy = w C^T + noise: s0 is the total variance of the fitted C.
    rng = np.random.default_rng(0)
    n, p, nx, seeds = 30, 5, 2, 2000
    sigma = np.array([0.1, 0.2, 0.5, 1.0, 2.0])
    C = rng.standard_normal((nx, p))
    noise = np.array([0.3, 0.05])
    fits, s0s = [], []
    for _ in range(seeds):
        w = rng.standard_normal((n, p)) * sigma
        dy = w @ C.T + noise * rng.standard_normal((n, nx))
        fit, s0 = estimators.zeroth_order_fit(w, dy, np.ones(n, bool), sigma)
        fits.append(fit)
        s0s.append(s0)
    fits = np.asarray(fits)
    assert np.allclose(fits.mean(0), C, atol=0.05)
    empirical = np.sum(fits.var(axis=0, ddof=1))
    assert np.mean(s0s) == pytest.approx(empirical, rel=0.15)
    # Same numbers through jax.numpy (the JAX backend), in float32.
    fit_j, s0_j = estimators.zeroth_order_fit(jnp.asarray(w), jnp.asarray(dy), jnp.ones(n, bool), jnp.asarray(sigma))
    assert np.allclose(np.asarray(fit_j), fit, atol=1e-4) and float(s0_j) == pytest.approx(s0, rel=1e-3)


def test_alpha_order_combine_numpy_and_jax_agree():
    rng = np.random.default_rng(1)
    n, nx, nu = 40, 2, 1
    sigma = np.array([0.1, 0.2, 0.3])
    w = rng.standard_normal((n, nx + nu)) * sigma
    first_i = 1.0 + 0.5 * rng.standard_normal((n, nx, nx + nu))
    dy = w @ np.ones((nx + nu, nx)) + 0.01 * rng.standard_normal((n, nx))
    valid = np.arange(n) % 7 != 3
    AB_np, alpha_np = estimators.alpha_order_combine(first_i, valid, w, dy, sigma, 2.0)
    assert isinstance(AB_np, np.ndarray)
    AB_j, alpha_j = estimators.alpha_order_combine(*map(jnp.asarray, (first_i, valid, w, dy, sigma)), 2.0)
    assert 0.0 < float(alpha_np) < 1.0
    assert float(alpha_j) == pytest.approx(float(alpha_np), rel=1e-3)
    assert np.allclose(np.asarray(AB_j), AB_np, atol=1e-4)


def test_alpha_order_underdetermined_falls_back_to_zeroth():
    # n <= p: no residual degrees of freedom, s0 = eps = inf, the check cannot vouch for
    # the first-order mean, so alpha = 0 (the minimum-norm fit).
    f = lambda dx, du: jnp.sin(1.0 + dx) + du
    dx, du = _offsets(6, n=2)
    sigma = jnp.array([SIGMA, SIGMA])
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, sigma)
    A0, B0, _ = estimators.zeroth_order_bundle(f, dx, du, sigma)
    assert float(stats["alpha"]) == 0.0
    assert np.allclose(np.asarray(A), np.asarray(A0), atol=1e-5) and np.allclose(np.asarray(B), np.asarray(B0), atol=1e-5)


def test_alpha_order_all_branches_dropped_is_finite():
    f = lambda dx, du: jnp.full(1, jnp.nan) + dx + du
    dx, du = _offsets(7, n=50)
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, jnp.array([SIGMA, SIGMA]))
    assert np.all(np.asarray(A) == 0.0) and np.all(np.asarray(B) == 0.0)
    assert float(stats["alpha"]) == 0.0 and int(stats["bundle_dropped"]) == 50
    # The shared combiner on NumPy arrays (the C backend) likewise.
    nan = np.full((50, 1, 2), np.nan)
    AB, alpha = estimators.alpha_order_combine(nan, np.zeros(50, bool), np.ones((50, 2)), np.full((50, 1), np.nan), np.ones(2))
    assert np.all(AB == 0.0) and alpha == 0.0


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
