"""Gradient estimators of one transition ``y = f(dx, du)``.

Every estimator sees the transition in tangent coordinates: ``dx`` (``nx``) is an offset
from the current state, ``du`` (``nu``) an offset from the action, and ``y`` the offset of
the next state from the nominal next state. Each returns ``(A, B, stats)`` with
``A = dy/dx`` (``nx x nx``) and ``B = dy/du`` (``nx x nu``).

* ``exact``: forward-mode autodiff (``jax.jacfwd``) of the converged MJX step.
* ``first_order_bundle``: mean of exact Jacobians at perturbed inputs (Suh et al. 2022).
* ``zeroth_order_bundle``: least-squares fit of [A B] to forward differences.
* ``alpha_order_bundle``: AoBG (Suh et al. 2022), ``alpha * first + (1 - alpha) * zeroth``
  with ``alpha`` the inverse-variance weight ``s0 / (s0 + s1)`` of the first-order mean
  (variance ``s1``) and the least-squares fit (variance ``s0``), shrunk by the paper's
  robustness check ``alpha * |first - zeroth|_F + eps <= gamma``, by default with
  ``gamma = tolerance * |zeroth|_F`` (``alpha_order_combine``).

Perturbation offsets are constants (no gradient flows through sampling), and branches
that produce non-finite values are dropped and counted, as in the BCG reimplementation.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from bcg_envs.gradients.config import ALPHA_BOUNDS, ALPHA_TOLERANCE

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


#: z-score of AoBG's confidence interval: ``eps = ALPHA_CONFIDENCE_Z * sqrt(s0)`` is the
#: half-width of a two-sided 95 % (normal) interval of the zeroth-order estimate.
ALPHA_CONFIDENCE_Z = 1.96


def _namespace(*arrays):
    """``numpy`` when every input is a NumPy array or Python/NumPy scalar (the C backend,
    which keeps float64), else ``jax.numpy`` (traceable under ``jit``)."""
    if all(isinstance(a, (np.ndarray, np.generic, float, int)) for a in arrays):
        return np
    return jnp


def _finite_rows(xp, a):
    return xp.all(xp.isfinite(a.reshape(a.shape[0], -1)), axis=1)


def first_order_moments(first_i, valid):
    """``(mean, s1)`` of per-branch first-order samples ``first_i`` (n, ...) over the
    ``valid`` rows: ``s1`` is the total (summed over entries, i.e. squared-Frobenius)
    variance of the mean, ``sum_entries var_ddof1 / n``; ``inf`` with fewer than 2 valid
    rows (no variance can be estimated). NumPy or JAX arrays."""
    xp = _namespace(first_i, valid)
    first_i = xp.asarray(first_i)
    valid = xp.asarray(valid) & _finite_rows(xp, first_i)
    m = valid.reshape((-1,) + (1,) * (first_i.ndim - 1))
    x = xp.where(m, first_i, 0.0)
    n = xp.sum(valid.astype(x.dtype))
    mean = xp.sum(x, axis=0) / xp.maximum(n, 1.0)
    sq = xp.where(m, (x - mean) ** 2, 0.0)
    s1 = xp.sum(sq) / xp.maximum(n - 1.0, 1.0) / xp.maximum(n, 1.0)
    return mean, xp.where(n >= 2, s1, xp.inf)


def zeroth_order_fit(w, dy, valid, sigma):
    """Least-squares ``[A B]`` (nx, p) from inputs ``w`` (n, p) and outputs ``dy`` (n, nx)
    over the ``valid`` rows, and ``s0``, the total variance of that estimate.

    The fit is on the ``sigma``-scaled design ``W_s = W diag(1/sigma)`` (one SVD, rank
    cutoff as ``numpy.linalg.lstsq``; minimum norm where rank-deficient) and unscaled.
    With the classical (homoscedastic) error model, row ``r`` has residual variance
    ``s_r^2 = sum_i res_ir^2 / (n - rank)`` and coefficient covariance
    ``s_r^2 (W^T W)^-1 = s_r^2 diag(1/sigma) (W_s^T W_s)^+ diag(1/sigma)``, so

        s0 = sum_r s_r^2 * trace((W^T W)^-1).

    ``s0 = inf`` unless ``n > p`` (p = nx + nu unknowns per row; with ``n <= p`` the fit
    interpolates, no residual degrees of freedom are left and its error is unknown).
    Inputs with ``sigma <= 1e-12`` are unperturbed: their coefficients are reported as 0
    and add no variance. NumPy or JAX arrays.
    """
    xp = _namespace(w, dy, valid, sigma)
    w, dy = xp.asarray(w), xp.asarray(dy)
    valid = xp.asarray(valid) & _finite_rows(xp, w) & _finite_rows(xp, dy)
    n_rows, p = w.shape
    sigma = xp.asarray(sigma, dtype=w.dtype)
    perturbed = sigma > 1e-12
    scale = xp.maximum(sigma, 1e-12)
    m = valid[:, None]
    ws = xp.where(m, w / scale, 0.0)
    y = xp.where(m, dy, 0.0)
    U, S, Vt = xp.linalg.svd(ws, full_matrices=False)
    keep = S > xp.finfo(ws.dtype).eps * max(n_rows, p) * S[0]
    inv_s = xp.where(keep, 1.0 / xp.where(keep, S, 1.0), 0.0)
    coef_s = Vt.T @ (inv_s[:, None] * (U.T @ y))  # (p, nx), scaled coordinates
    res = y - ws @ coef_s
    n = xp.sum(valid.astype(w.dtype))
    rank = xp.sum(keep.astype(w.dtype))
    s_r2 = xp.sum(res**2, axis=0) / xp.maximum(n - rank, 1.0)
    inv_scale2 = xp.where(perturbed, 1.0 / scale**2, 0.0)
    trace = xp.sum(xp.sum(Vt**2 * inv_s[:, None] ** 2, axis=0) * inv_scale2)
    s0 = xp.where(n > p, xp.sum(s_r2) * trace, xp.inf)
    coef = xp.where(perturbed[:, None], coef_s / scale[:, None], 0.0)
    return coef.T, s0


def alpha_order_combine(first_i, valid, w, dy, sigma, tolerance: float = ALPHA_TOLERANCE, bound: str = "relative"):
    """AoBG's ``(AB, alpha)``: ``AB = alpha * first + (1 - alpha) * zeroth`` (nx, p).

    Suh, Simchowitz, Zhang, Tedrake (2022), "Do Differentiable Simulators Give Better
    Policy Gradients?" (ICML), the alpha-order gradient estimator:

    * ``first``: mean of the per-branch exact Jacobians ``first_i`` (n, nx, p), total
      variance ``s1`` (``first_order_moments``); ``zeroth``: least-squares fit of the
      forward differences ``dy`` (n, nx) to the offsets ``w`` (n, p), total variance
      ``s0`` (``zeroth_order_fit``, the variance of the estimate actually mixed).
    * Round-off floor: a variance below ``finfo(dtype).eps * |zeroth|_F^2`` (an RMS error
      under 1.5e-8 of the Jacobian's size in float64, 3.5e-4 in float32) counts as 0.
      Where the step is affine over the sampling region both variances are round-off
      (~1e-22 |zeroth|^2 measured on BoxPush's MuJoCo C backend) and their ratio,
      noise, would decide alpha; with the floor both are 0 and ``alpha* = 1``.
    * ``alpha* = s0 / (s0 + s1)``, the inverse-variance weight (1 when both are 0).
    * Robustness: the zeroth-order estimate is unbiased for the smoothed Jacobian, the
      first-order mean is not across a discontinuity (or a stiff region it does not
      resolve). With ``eps = 1.96 sqrt(s0)``, the half-width of a 95 % normal confidence
      interval of the zeroth-order estimate (exact for one entry, conservative for the
      Frobenius norm of several; kept so, since the entries' errors are correlated, all
      coming from the same branches' residuals), and ``gap = |first - zeroth|_F``,
      ``alpha`` is the largest value in ``[0, alpha*]`` with ``alpha * gap + eps <=
      gamma``, which bounds the distance of the result to the smoothed Jacobian by gamma
      with ~95 % confidence: ``alpha = min(alpha*, (gamma - eps) / gap)``. Where
      ``eps > gamma`` no ``alpha`` satisfies it and ``alpha = 0`` (zeroth order alone).
    * The bound gamma: ``bound="relative"`` (default) ``gamma = tolerance * |zeroth|_F``,
      a fraction of the smoothed Jacobian's size, so one ``tolerance`` fits Jacobians of
      norm ~1 (free motion) and ~1e4 (stiff contact) alike; a discontinuity whose bias
      ``gap`` is the whole Jacobian gets ``alpha <= tolerance``. It scales by the
      unbiased ``zeroth``, not by ``first``: a first-order mean made large by its own
      bias would widen its own allowance. ``bound="absolute"``: ``gamma = tolerance``
      (the paper's form, in the units of ``[A B]``).
    * With ``n <= p`` valid rows ``s0 = eps = inf``: the check cannot vouch for the
      first-order mean, so ``alpha = 0`` too (the minimum-norm fit, what ``zeroth``
      returns there); all rows dropped gives ``AB = 0``, ``alpha = 0``.

    ``valid`` (n,) masks the branches (non-finite rows are dropped as well); nothing
    non-finite reaches ``AB`` or ``alpha``. NumPy inputs are computed in NumPy, JAX
    inputs in ``jax.numpy`` (jit-safe).
    """
    if bound not in ALPHA_BOUNDS:
        raise ValueError(f"BundleConfig.alpha_bound must be one of {ALPHA_BOUNDS}, got {bound!r}")
    xp = _namespace(first_i, valid, w, dy, sigma)
    first_i, dy = xp.asarray(first_i), xp.asarray(dy)
    valid = xp.asarray(valid) & _finite_rows(xp, first_i) & _finite_rows(xp, dy)
    first, s1 = first_order_moments(first_i, valid)
    zeroth, s0 = zeroth_order_fit(w, dy, valid, sigma)
    scale = xp.sqrt(xp.sum(zeroth**2))  # |zeroth|_F
    floor = xp.finfo(zeroth.dtype).eps * scale**2
    s0_ok = xp.isfinite(s0)
    s0f = xp.where(s0_ok & (s0 > floor), s0, 0.0)
    s1 = xp.where(s1 > floor, s1, 0.0)
    total = s0f + s1
    alpha_star = xp.where(total > 0, s0f / xp.where(total > 0, total, 1.0), 1.0)
    eps = ALPHA_CONFIDENCE_Z * xp.sqrt(s0f)
    gap = xp.sqrt(xp.sum((first - zeroth) ** 2))
    gamma = tolerance * scale if bound == "relative" else tolerance
    cap = xp.where(gap > 0, (gamma - eps) / xp.where(gap > 0, gap, 1.0), xp.inf)
    alpha = xp.where(s0_ok & (eps <= gamma), xp.clip(xp.minimum(alpha_star, cap), 0.0, 1.0), 0.0)
    alpha = xp.where(xp.isfinite(alpha), alpha, 0.0)
    AB = xp.where(alpha > 0, alpha * first + (1.0 - alpha) * zeroth, zeroth)
    return AB, alpha


def alpha_order_bundle(
    f: Transition,
    dx: jnp.ndarray,
    du: jnp.ndarray,
    sigma: jnp.ndarray,
    tolerance: float = ALPHA_TOLERANCE,
    bound: str = "relative",
) -> Jacobians:
    """AoBG (Suh et al. 2022): first-order bundle and least-squares zeroth-order fit of the
    same branches, mixed by ``alpha_order_combine`` with robustness bound ``tolerance``
    (``BundleConfig.alpha_tolerance``) of kind ``bound`` (``BundleConfig.alpha_bound``);
    ``sigma`` is the per-input std."""
    nx = dx.shape[1]
    A_i, B_i, y_i = _branch_jacobians(f, dx, du)
    y0 = f(jnp.zeros(nx), jnp.zeros(du.shape[1]))
    valid = finite_rows(A_i, B_i, y_i) & jnp.all(jnp.isfinite(y0))
    AB, alpha = alpha_order_combine(
        jnp.concatenate([A_i, B_i], axis=2), valid, jnp.concatenate([dx, du], axis=1), y_i - y0, sigma, tolerance, bound
    )
    n_valid = jnp.sum(valid)
    return AB[:, :nx], AB[:, nx:], _stats(n_valid, dx.shape[0] - n_valid, alpha)
