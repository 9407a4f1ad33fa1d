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


def _global_offsets(seed, n, nx, nu):
    sampler = global_sampler(jnp.full(nx + nu, SIGMA, jnp.float32), nx)
    return estimators.sample_offsets(sampler, jax.random.PRNGKey(seed), n, False)


def test_alpha_order_linear_map_is_exact_with_alpha_one():
    # An affine step: every exact Jacobian is M, the fit has no residual, so s0 and s1
    # are round-off; the round-off floor makes both 0 and alpha* = 1 (before the floor
    # their ratio, noise, decided alpha). The result is M.
    nx, nu = 3, 2
    M = jnp.asarray(np.random.default_rng(0).standard_normal((nx, nx + nu)), jnp.float32)
    f = lambda dx, du: M @ jnp.concatenate([dx, du]) + 1.0
    dx, du = _global_offsets(9, 40, nx, nu)
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, jnp.full(nx + nu, SIGMA))
    assert float(stats["alpha"]) == 1.0
    assert np.allclose(np.asarray(jnp.concatenate([A, B], axis=1)), np.asarray(M), atol=1e-4)


def test_alpha_order_round_off_variances_do_not_decide_alpha():
    # The MuJoCo C backend's affine steps (a box sliding on every axis, nothing in reach):
    # finite-difference Jacobians differ by ~1e-12 and the fit's residuals by ~1e-15, so
    # s1 ~ 1e-24 >> s0 ~ 1e-28 and s0 / (s0 + s1) ~ 1e-4 although both estimates are exact
    # to 1e-11. Variances under finfo.eps * |zeroth|_F^2 count as 0: alpha = 1.
    rng = np.random.default_rng(2)
    n, nx, nu = 48, 10, 2
    M = rng.standard_normal((nx, nx + nu))
    sigma = np.full(nx + nu, 0.01)
    w = rng.standard_normal((n, nx + nu)) * sigma
    first_i = M + 1e-12 * rng.standard_normal((n, nx, nx + nu))
    dy = w @ M.T + 1e-15 * rng.standard_normal((n, nx))
    AB, alpha = estimators.alpha_order_combine(first_i, np.ones(n, bool), w, dy, sigma)
    assert alpha == 1.0 and np.allclose(AB, M, atol=1e-9)


def test_alpha_order_smooth_quadratic_weights_by_variance_and_is_unbiased():
    # f = M w + w^T Q_k w / 2: the smoothed derivative at 0 is M exactly. Both estimates
    # are unbiased and agree within their noise, so the bias check does not bind and alpha
    # is the inverse-variance weight, ~p / (p + 2) = 0.83 for p = 10 inputs (the fit pays
    # for p unknowns against the curvature noise, the first-order mean for one); the
    # result is within ~1 % of M.
    nx, nu = 4, 6
    rng = np.random.default_rng(0)
    M = jnp.asarray(rng.standard_normal((nx, nx + nu)), jnp.float32)
    Q = jnp.asarray(0.5 * rng.standard_normal((nx, nx + nu, nx + nu)), jnp.float32)

    def f(dx, du):
        w = jnp.concatenate([dx, du])
        return M @ w + 0.5 * jnp.einsum("i,kij,j->k", w, Q, w)

    dx, du = _global_offsets(8, 2000, nx, nu)
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, jnp.full(nx + nu, SIGMA))
    assert 0.75 < float(stats["alpha"]) <= 1.0
    err = np.linalg.norm(np.asarray(jnp.concatenate([A, B], axis=1)) - np.asarray(M))
    assert err < 0.03 * np.linalg.norm(np.asarray(M))


def test_alpha_order_smooth_ridge_keeps_first_order_and_true_derivative():
    # f = sin(1 + dx + v.du): smoothed derivative cos(1) exp(-s^2 / 2) (1, v), s^2 the
    # variance of dx + v.du. With p = 20 inputs the least-squares fit pays for 20 unknowns
    # per row (s0 ~ p/2 times the curvature noise vs s1 ~ 1 times), so alpha* ~ p/(p+2);
    # both estimates agree, the bias check does not bind. The relative bound (10 % of
    # |zeroth|_F) needs the fit's confidence interval well inside it: the curvature over
    # +/- 0.5 rad leaves eps = 18 % of |zeroth| at 1000 samples (alpha 0, the fit cannot
    # vouch for the first-order mean) and ~4.5 % at 16000, hence n = 16000 (was 1000 with
    # the absolute gamma = 1, which then was 1.2 |zeroth|_F).
    nu, n = 19, 16000
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
    # h phi(0) / sigma = 13.3. The bias gap = |first - zeroth| is the whole Jacobian, so the
    # relative bound (gamma = 0.1 |zeroth|_F, the default) allows alpha <= 0.1 - eps/|zeroth|
    # (~0.08). Before, the test used the absolute gamma = 1 (alpha < 0.05 here), which
    # made alpha 0 at every real-task step; it stays reachable with bound="absolute".
    h = 10.0
    f = lambda dx, du: h * jnp.where(dx > 0, 1.0, 0.0) + 0.0 * du
    dx, du = _offsets(1)
    sigma = jnp.array([SIGMA, SIGMA])
    expected = h * norm.pdf(0.0) / SIGMA
    step = h * np.asarray(dx[:, 0] > 0, float)
    se = step.std() / (SIGMA * np.sqrt(N))  # of the least-squares slope
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, sigma)
    alpha = float(stats["alpha"])
    assert 0.0 < alpha <= 0.1
    # The choice satisfies alpha * gap + eps <= gamma = 0.1 |zeroth|_F, and the result is
    # within gamma of the smoothed derivative.
    w = jnp.concatenate([dx, du], axis=1)
    zeroth, s0 = estimators.zeroth_order_fit(w, f(dx, du) - f(jnp.zeros(1), jnp.zeros(1)), jnp.ones(N, bool), sigma)
    gap = float(jnp.linalg.norm(zeroth))  # first = 0
    gamma = 0.1 * gap
    assert alpha * gap + 1.96 * np.sqrt(float(s0)) <= gamma * (1 + 1e-5)
    assert abs(float(A[0, 0]) - expected) < gamma
    assert abs(float(A[0, 0]) - expected) < 3 * se + alpha * expected
    # A tighter relative bound, or the paper's absolute gamma = 1: alpha ~ 0.
    _, _, stats_tight = estimators.alpha_order_bundle(f, dx, du, sigma, tolerance=0.03)
    assert float(stats_tight["alpha"]) < 0.01
    A_abs, _, stats_abs = estimators.alpha_order_bundle(f, dx, du, sigma, tolerance=1.0, bound="absolute")
    assert float(stats_abs["alpha"]) < 0.05
    assert abs(float(A_abs[0, 0]) - expected) < 1.0  # the guarantee: within gamma
    # Without the check (a huge gamma): inverse-variance weighting alone returns the biased 0.
    A_ivw, _, stats_ivw = estimators.alpha_order_bundle(f, dx, du, sigma, tolerance=1e9)
    assert float(stats_ivw["alpha"]) == pytest.approx(1.0)
    assert abs(float(A_ivw[0, 0]) - expected) > 10 * se


def test_alpha_order_relative_bound_is_scale_invariant():
    # Scaling the dynamics by c scales both estimates, gap and eps by c: with the relative
    # bound alpha does not change, with an absolute gamma it goes from 1 (small Jacobians)
    # to 0 (large ones, e.g. stiff contact at ~1e4).
    g = lambda dx, du: 10.0 * jnp.where(dx > 0.1, 1.0, 0.0) + 3.0 * dx + jnp.sin(2.0 * dx) + 0.0 * du
    dx, du = _offsets(11, n=2000)
    sigma = jnp.array([SIGMA, SIGMA])
    rel, absolute = [], []
    for c in (1e-3, 1.0, 1e4):
        f = lambda dx, du, c=c: c * g(dx, du)
        rel.append(float(estimators.alpha_order_bundle(f, dx, du, sigma)[2]["alpha"]))
        _, _, stats = estimators.alpha_order_bundle(f, dx, du, sigma, tolerance=1.0, bound="absolute")
        absolute.append(float(stats["alpha"]))
    assert 0.0 < rel[1] < 1.0
    assert rel[0] == pytest.approx(rel[1], abs=1e-3) and rel[2] == pytest.approx(rel[1], abs=1e-3)
    assert absolute[0] > 0.9 and absolute[2] == 0.0


def _smoothed_derivative(fprime, sigma, points=400_001):
    """d/dx E[f(x + w)] at 0, w ~ N(0, sigma^2): a fine trapezoid quadrature of E[f'(w)]."""
    g = np.linspace(-8 * sigma, 8 * sigma, points)
    return float(np.trapezoid(fprime(g) * norm.pdf(g, scale=sigma), g))


def test_alpha_order_stiff_tanh_moves_to_zeroth():
    # 50 tanh(40 x): smooth, so first order is unbiased, but its samples 2000 sech^2(40 w)
    # have a huge variance (s1 ~ 8x s0): alpha* ~ 0.1. The zeroth-order interval (~6) is
    # inside the relative bound (0.1 x 133) and the gap is first order's noise, so the
    # check does not bind: alpha = alpha* ~ 0.1, small, from the variances alone (with the
    # former absolute gamma = 1 the interval exceeded gamma and alpha was 0).
    n = 2000
    f = lambda dx, du: 50.0 * jnp.tanh(40.0 * dx) + 0.0 * du
    dx, du = _offsets(2, n=n)
    sigma = jnp.array([SIGMA, SIGMA])
    expected = _smoothed_derivative(lambda g: 2000.0 / np.cosh(40.0 * g) ** 2, SIGMA)
    y = 50.0 * np.tanh(40.0 * np.asarray(dx[:, 0]))
    se = y.std() / (SIGMA * np.sqrt(n))
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, sigma)
    assert 0.0 < float(stats["alpha"]) < 0.3
    assert np.isfinite(np.asarray(A)).all() and np.isfinite(np.asarray(B)).all()
    assert abs(float(A[0, 0]) - expected) < 3 * se
    A_ivw, _, stats_ivw = estimators.alpha_order_bundle(f, dx, du, sigma, tolerance=1e9)
    assert float(stats_ivw["alpha"]) == pytest.approx(float(stats["alpha"]), rel=1e-3)
    assert abs(float(A_ivw[0, 0]) - expected) < 3 * se
    # The paper's absolute gamma = 1 is below the interval: zeroth order alone.
    _, _, stats_abs = estimators.alpha_order_bundle(f, dx, du, sigma, tolerance=1.0, bound="absolute")
    assert float(stats_abs["alpha"]) == 0.0


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


@pytest.mark.parametrize("bound, tolerance", [("relative", 0.5), ("absolute", 2.0)])
def test_alpha_order_combine_numpy_and_jax_agree(bound, tolerance):
    rng = np.random.default_rng(1)
    n, nx, nu = 40, 2, 1
    sigma = np.array([0.1, 0.2, 0.3])
    w = rng.standard_normal((n, nx + nu)) * sigma
    first_i = 1.0 + 0.5 * rng.standard_normal((n, nx, nx + nu))
    dy = w @ np.ones((nx + nu, nx)) + 0.01 * rng.standard_normal((n, nx))
    valid = np.arange(n) % 7 != 3
    AB_np, alpha_np = estimators.alpha_order_combine(first_i, valid, w, dy, sigma, tolerance, bound)
    assert isinstance(AB_np, np.ndarray)
    AB_j, alpha_j = estimators.alpha_order_combine(*map(jnp.asarray, (first_i, valid, w, dy, sigma)), tolerance, bound)
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
    assert np.allclose(np.asarray(A), np.asarray(A0), atol=1e-5) and np.allclose(
        np.asarray(B), np.asarray(B0), atol=1e-5
    )


def test_alpha_order_all_branches_dropped_is_finite():
    f = lambda dx, du: jnp.full(1, jnp.nan) + dx + du
    dx, du = _offsets(7, n=50)
    A, B, stats = estimators.alpha_order_bundle(f, dx, du, jnp.array([SIGMA, SIGMA]))
    assert np.all(np.asarray(A) == 0.0) and np.all(np.asarray(B) == 0.0)
    assert float(stats["alpha"]) == 0.0 and int(stats["bundle_dropped"]) == 50
    # The shared combiner on NumPy arrays (the C backend) likewise.
    nan = np.full((50, 1, 2), np.nan)
    AB, alpha = estimators.alpha_order_combine(
        nan, np.zeros(50, bool), np.ones((50, 2)), np.full((50, 1), np.nan), np.ones(2)
    )
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


def test_alpha_order_unknown_bound_names_the_field():
    with pytest.raises(ValueError, match="BundleConfig.alpha_bound must be one of"):
        ones = np.ones
        estimators.alpha_order_combine(
            ones((5, 1, 2)), ones(5, bool), ones((5, 2)), ones((5, 1)), ones(2), 0.1, "scaled"
        )


def test_alpha_on_box_push_c_backend_keeps_first_order_where_smooth():
    """BoxPush (MuJoCo C), a contact-free smooth state: the box slides on x and y and
    spins (every joint's dry friction stays in slip over the sampled velocities), the
    pusher is 25 cm away. The step is affine there: AoBG keeps the first-order estimate
    (alpha > 0.5; it was 0 with the absolute gamma = 1 and no round-off floor).

    A box at rest is not such a state: the sampled velocities (2 cm/s) cross its dry
    friction's stick/slip, where BoxPush's 4 solver iterations do not converge and the
    branches' finite-difference Jacobians disagree (norms 2.5 to 89 out of contact at the
    reset of seed 0, 2.5 at each with 50 iterations), so s1 >> s0 and alpha ~ 0 is AoBG's answer there."""
    import gymnasium as gym

    import bcg_envs  # noqa: F401  (registers the envs)
    from bcg_envs import BundleConfig

    env = gym.make("bcg_envs/BoxPush-v0", backend="mujoco")
    try:
        env.reset(seed=0)
        sim = env.unwrapped
        qpos, qvel = np.array([-0.25, 0.2, 0.0, 0.0, 0.1]), np.array([0.0, 0.0, 0.3, 0.25, 2.0])
        action = np.array([0.5, 0.0], np.float32)
        for seed in (0, 1):
            sim.set_state(qpos, qvel)
            out = sim.grad_step(action, estimator="alpha", bundle=BundleConfig(seed=seed))
            assert out.info["max_contact_force"] == 0.0
            assert out.info["bundle_alpha"] > 0.5
        sim.set_state(qpos, qvel)
        exact = sim.grad_step(action, estimator="exact")
        assert np.allclose(out.jacobians.A, exact.jacobians.A, atol=1e-4)
        assert np.allclose(out.jacobians.B, exact.jacobians.B, atol=1e-4)
    finally:
        env.close()
