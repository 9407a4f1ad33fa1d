"""A 1-D ball hitting a wall under the paper's penalty contact: exact and bcg step
derivatives against hand-computed ones.

One physics substep of the ball (1 kg, slide joint, no gravity) moving at ``v`` toward a
wall, penetration ``p`` (negative: still apart). The penalty model (``PenaltyContact``)
gives the post-step velocity in closed form:

    v' = v - sigmoid(kappa p) (v + beta relu(p) / h)

so ``d v'/d x`` is known by hand; it peaks at ``-kappa v / 4`` at contact (the paper's
pathology). ``bcg`` perturbs the contact point by N(0, s^2) along the normal, so its
estimate is the Gaussian-smoothed derivative, computed here by quadrature, with a Monte
Carlo error known from the same quadrature. The global first-order ``bundle`` with the
same position sigma averages exact derivatives at perturbed states: the same smoothed
derivative. ``zeroth``'s least-squares slope over Gaussian perturbations has that same
expectation (Stein's lemma: the regression slope of f(x + d) on d is E[f'(x + d)]; the
velocity enters v' linearly, so perturbing it too leaves the mean unchanged), checked
against the spread of its estimates across seeds.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg_envs import BundleConfig
from tests.ball_wall import WALL_CONTACT_X
from tests.ball_wall import XML as BALL_XML

V, SIGMA, H, BETA, KAPPA, SAMPLES = 1.0, 0.01, 0.002, 0.2, 3000.0, 4096
ZEROTH_SEEDS = 16


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def hand_dvdx(p):
    """d v'/d x of one penalty substep (x moves the ball into the wall: dp = dx)."""
    s = sigmoid(KAPPA * p)
    return -KAPPA * s * (1 - s) * (V + BETA * np.maximum(p, 0) / H) - s * BETA * (p > 0) / H


def smoothed(p):
    """E[hand_dvdx(p + d)], d ~ N(0, SIGMA^2), and the standard error of a SAMPLES-mean."""
    d = np.linspace(-8 * SIGMA, 8 * SIGMA, 400_001)
    w = np.exp(-0.5 * (d / SIGMA) ** 2)
    w /= w.sum()
    g = hand_dvdx(p + d)
    mean = float((w * g).sum())
    return mean, float(np.sqrt((w * (g - mean) ** 2).sum() / SAMPLES))


@pytest.fixture(scope="module")
def derivatives(make_toy_env):
    env = make_toy_env(
        BALL_XML,
        ctrl_dt=H,
        initial_state=lambda key: (jnp.zeros(1), jnp.full(1, V)),
        force_threshold=0.0,
        estimator="exact",
        contact_model="penalty",
        kappa=KAPPA,
    )
    cfg = BundleConfig(num_samples=SAMPLES, state_sigma=(SIGMA, 0.0), force_threshold=0.0, horizon=1)  # one step

    def dvdx(x0, estimator):
        state = env.state_from(jnp.array([x0]), jnp.array([V]), None, {}, jax.random.PRNGKey(1))
        return env.grad_step(state, jnp.zeros(1), estimator, cfg)[1].A[1, 0]

    penetrations = np.array([-0.01, -0.003, 0.0, 0.003])
    f = jax.jit(jax.vmap(lambda x0: (dvdx(x0, "exact"), dvdx(x0, "bcg"))))
    exact, bcg = f(jnp.asarray(WALL_CONTACT_X + penetrations, jnp.float32))
    return env, penetrations, np.asarray(exact), np.asarray(bcg), dvdx


@pytest.fixture(scope="module")
def bundle_derivatives(derivatives):
    """The global first-order bundle's d v'/d x per penetration (a compile of its own)."""
    _, penetrations, _, _, dvdx = derivatives
    f = jax.jit(jax.vmap(lambda x0: dvdx(x0, "bundle")))
    return penetrations, np.asarray(f(jnp.asarray(WALL_CONTACT_X + penetrations, jnp.float32)))


@pytest.fixture(scope="module")
def zeroth_draws(derivatives):
    """``ZEROTH_SEEDS`` zeroth-order estimates of d v'/d x per penetration (a compile of its own)."""
    env, penetrations, *_ = derivatives
    cfg = BundleConfig(num_samples=1024, state_sigma=(SIGMA, 0.01), horizon=1)

    def zeroth(x0, seed):
        state = env.state_from(jnp.array([x0]), jnp.array([V]), None, {}, jax.random.PRNGKey(seed))
        return env.grad_step(state, jnp.zeros(1), "zeroth", cfg)[1].A[1, 0]

    seeds = jnp.arange(ZEROTH_SEEDS)
    g = jax.jit(jax.vmap(lambda x0: jax.vmap(lambda k: zeroth(x0, k))(seeds)))
    return penetrations, np.asarray(g(jnp.asarray(WALL_CONTACT_X + penetrations, jnp.float32)))


def test_exact_step_derivative_is_the_hand_derivative(derivatives):
    """Including the spike at contact: -kappa v / 4 = -750 s^-1 at p = 0 for kappa = 3000."""
    _, p, exact, *_ = derivatives
    hand = hand_dvdx(p)
    np.testing.assert_allclose(exact, hand, rtol=0.01, atol=0.05)
    assert exact[p == 0.0][0] < -700


def test_bcg_is_the_gaussian_smoothed_derivative_and_stays_bounded(derivatives):
    """bcg's mean of branch derivatives equals the smoothed derivative within 4 standard
    errors; at contact it is ~8x smaller than exact's spike (-90 vs -750: a Gaussian
    average of the sigmoid's derivative, which does not grow with kappa)."""
    _, p, exact, bcg, _ = derivatives
    for pi, b in zip(p, bcg):
        mean, stderr = smoothed(pi)
        assert abs(b - mean) < 4 * stderr + 0.01 * abs(mean), (pi, b, mean, stderr)
    at_contact = p == 0.0
    assert abs(bcg[at_contact][0]) < abs(exact[at_contact][0]) / 5


@pytest.mark.integration  # ~25 s of compile; the C backend's bundle has its default-tier check
def test_global_bundle_is_the_same_smoothed_derivative(bundle_derivatives):
    """The first-order bundle over state perturbations of the same sigma: bcg's expectation
    and standard error (here every branch moves the ball, not only its contact point)."""
    p, bundle = bundle_derivatives
    for pi, b in zip(p, bundle):
        mean, stderr = smoothed(pi)
        assert abs(b - mean) < 4 * stderr + 0.01 * abs(mean), (pi, b, mean, stderr)


@pytest.mark.integration
def test_zeroth_order_slope_has_the_smoothed_derivative_as_its_mean(zeroth_draws):
    """The mean of 16 seeds' least-squares slopes within 4 standard errors (their spread
    over seeds) of the smoothed derivative, at every penetration including the spike."""
    p, draws = zeroth_draws
    assert np.isfinite(draws).all()
    for pi, d in zip(p, draws):
        mean, _ = smoothed(pi)
        stderr = d.std(ddof=1) / np.sqrt(len(d))
        assert abs(d.mean() - mean) < 4 * stderr + 0.01 * abs(mean), (pi, d.mean(), mean, stderr)
