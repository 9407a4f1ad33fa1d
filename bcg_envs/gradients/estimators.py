"""Gradient estimators of one transition ``y = f(dx, du)``.

Every estimator sees the transition in tangent coordinates: ``dx`` (``nx``) is an offset
from the current state, ``du`` (``nu``) an offset from the action, and ``y`` the offset of
the next state from the nominal next state. Each returns ``(A, B, stats)`` with
``A = dy/dx`` (``nx x nx``) and ``B = dy/du`` (``nx x nu``).

* ``exact``: forward-mode autodiff (``jax.jacfwd``) of the converged MJX step.
* ``first_order_bundle``: mean of exact Jacobians at perturbed inputs (Suh et al. 2022).
* ``zeroth_order_bundle``: least-squares fit of [A B] to forward differences.
* ``alpha_order_bundle``: AoBG, ``alpha * first + (1 - alpha) * zeroth`` with
  ``alpha = s0^2 / (s0^2 + s1^2)`` from the two estimators' sample variances.

Perturbation offsets are constants (no gradient flows through sampling), and branches
that produce non-finite values are dropped and counted, as in the BCG reimplementation.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import jax
import jax.numpy as jnp

Transition = Callable[[jnp.ndarray, jnp.ndarray], jnp.ndarray]
Sampler = Callable[[jax.Array], Tuple[jnp.ndarray, jnp.ndarray]]
Jacobians = Tuple[jnp.ndarray, jnp.ndarray, Dict[str, jnp.ndarray]]


def _stats(num_valid, num_dropped, alpha) -> Dict[str, jnp.ndarray]:
    """Per-step statistics; ``alpha`` is the weight of the first-order estimate in the
    returned Jacobian (1 for exact and first-order bundles, 0 for the zeroth-order bundle)."""
    return {
        "bundle_valid": jnp.asarray(num_valid, jnp.int32),
        "bundle_dropped": jnp.asarray(num_dropped, jnp.int32),
        "alpha": jnp.asarray(alpha, jnp.float32),
    }


def exact(f: Transition, nx: int, nu: int) -> Jacobians:
    A, B = jax.jacfwd(f, argnums=(0, 1))(jnp.zeros(nx), jnp.zeros(nu))
    valid = jnp.all(jnp.isfinite(A)) & jnp.all(jnp.isfinite(B))
    return A, B, _stats(valid, 1 - valid.astype(jnp.int32), 1.0)


def sample_offsets(sampler: Sampler, key: jax.Array, num_samples: int, antithetic: bool):
    """``num_samples`` (dx, du) offsets, in +/- pairs when ``antithetic``."""
    if antithetic:
        dx, du = jax.vmap(sampler)(jax.random.split(key, num_samples // 2))
        return jnp.concatenate([dx, -dx]), jnp.concatenate([du, -du])
    return jax.vmap(sampler)(jax.random.split(key, num_samples))


def finite_rows(*arrays: jnp.ndarray) -> jnp.ndarray:
    ok = None
    for a in arrays:
        row_ok = jnp.all(jnp.isfinite(a.reshape(a.shape[0], -1)), axis=1)
        ok = row_ok if ok is None else ok & row_ok
    return ok


def masked_mean(values: jnp.ndarray, valid: jnp.ndarray) -> jnp.ndarray:
    w = valid.astype(values.dtype).reshape((-1,) + (1,) * (values.ndim - 1))
    total = jnp.sum(jnp.where(w > 0, values, 0.0), axis=0)
    return total / jnp.maximum(jnp.sum(w), 1.0)


def _branch_jacobians(f: Transition, dx: jnp.ndarray, du: jnp.ndarray):
    """Exact Jacobians and next-state offsets of every branch (forward mode)."""

    def with_aux(dxi, dui):
        y = f(dxi, dui)
        return y, y

    jac = jax.jacfwd(with_aux, argnums=(0, 1), has_aux=True)
    (A, B), y = jax.vmap(jac)(dx, du)
    return A, B, y


def first_order_bundle(f: Transition, dx: jnp.ndarray, du: jnp.ndarray) -> Jacobians:
    """Mean of exact Jacobians at the perturbed inputs; also returns branch states."""
    A_i, B_i, y_i = _branch_jacobians(f, dx, du)
    valid = finite_rows(A_i, B_i, y_i)
    n_valid = jnp.sum(valid)
    stats = _stats(n_valid, dx.shape[0] - n_valid, 1.0)
    stats["mean_offset"] = masked_mean(y_i, valid)
    return masked_mean(A_i, valid), masked_mean(B_i, valid), stats


def _least_squares(w: jnp.ndarray, dy: jnp.ndarray, valid: jnp.ndarray, scale: jnp.ndarray):
    """[A B] minimizing sum_i |dy_i - [A B] w_i|^2 over valid rows (min-norm if underdetermined)."""
    mask = valid[:, None].astype(w.dtype)
    w_scaled = jnp.where(mask > 0, w / scale, 0.0)
    dy = jnp.where(mask > 0, dy, 0.0)
    sol, *_ = jnp.linalg.lstsq(w_scaled, dy)
    return (sol / scale[:, None]).T


def _zeroth_samples(f: Transition, dx: jnp.ndarray, du: jnp.ndarray):
    y0 = f(jnp.zeros(dx.shape[1]), jnp.zeros(du.shape[1]))
    y_i = jax.vmap(f)(dx, du)
    return y_i - y0, finite_rows(y_i) & jnp.all(jnp.isfinite(y0))


def zeroth_order_bundle(f: Transition, dx: jnp.ndarray, du: jnp.ndarray, sigma: jnp.ndarray) -> Jacobians:
    """Least-squares [A B] from forward evaluations only; ``sigma`` is the per-input std."""
    nx = dx.shape[1]
    dy, valid = _zeroth_samples(f, dx, du)
    AB = _least_squares(jnp.concatenate([dx, du], axis=1), dy, valid, jnp.maximum(sigma, 1e-12))
    n_valid = jnp.sum(valid)
    return AB[:, :nx], AB[:, nx:], _stats(n_valid, dx.shape[0] - n_valid, 0.0)


def alpha_order_bundle(f: Transition, dx: jnp.ndarray, du: jnp.ndarray, sigma: jnp.ndarray) -> Jacobians:
    """AoBG: interpolate first- and zeroth-order bundles by inverse sample variance.

    Per-sample zeroth-order estimates are the Gaussian-smoothing (Stein) terms
    ``dy_i w_i^T diag(1/sigma^2)``; per-sample first-order estimates are the branch
    Jacobians. ``s^2`` is the total (Frobenius) sample variance of each mean.
    """
    nx = dx.shape[1]
    A_i, B_i, _ = _branch_jacobians(f, dx, du)
    w = jnp.concatenate([dx, du], axis=1)
    dy, valid0 = _zeroth_samples(f, dx, du)
    valid = valid0 & finite_rows(A_i, B_i)
    n = jnp.maximum(jnp.sum(valid), 1.0)
    safe_sigma = jnp.maximum(sigma, 1e-12)

    first_i = jnp.concatenate([A_i, B_i], axis=2)
    first = masked_mean(first_i, valid)
    zeroth = _least_squares(w, dy, valid, safe_sigma)
    stein_i = dy[:, :, None] * (w / safe_sigma**2)[:, None, :]

    def total_var(samples):
        mean = masked_mean(samples, valid)
        sq = jnp.where(valid[:, None, None], (samples - mean) ** 2, 0.0)
        return jnp.sum(sq) / jnp.maximum(n - 1.0, 1.0) / n

    s1, s0 = total_var(first_i), total_var(stein_i)
    alpha = jnp.where(s0 + s1 > 0, s0 / (s0 + s1), 1.0)
    AB = alpha * first + (1.0 - alpha) * zeroth
    return AB[:, :nx], AB[:, nx:], _stats(jnp.sum(valid), dx.shape[0] - jnp.sum(valid), alpha)
