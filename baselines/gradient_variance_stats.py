"""Statistics of the gradient-variance sweep: total variance, bootstrap intervals, agreement with a reference."""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import numpy as np


def variance_across_seeds(grads: np.ndarray) -> float:
    """Total variance (sum over coordinates of the variance across rows), in float64."""
    return float(np.sum(np.var(np.asarray(grads, np.float64), axis=0)))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def _resample_weights(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) weights of bootstrap resamples of n rows (counts / n)."""
    idx = np.random.default_rng(seed).integers(0, n, (resamples, n))
    counts = np.zeros((resamples, n))
    np.add.at(counts, (np.arange(resamples)[:, None], idx), 1.0)
    return counts / n


def _weighted_variances(g: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Total variance of the rows of ``g`` (n, d) under each weight row of ``w`` (B, n; rows
    sum to 1), as half the weighted sum of squared distances between rows. Every term is
    non-negative, so one start 1e16 away from the rest cannot cancel a resample's spread into
    a negative variance, as E[g^2] - E[g]^2 does."""
    g = np.asarray(g, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        distances = np.stack([np.sum((g - row) ** 2, axis=1) for row in g])
        return 0.5 * np.einsum("bi,ij,bj->b", w, distances, w)


def _interval(samples: np.ndarray, level: float = 0.95) -> Tuple[float, float]:
    samples = samples[np.isfinite(samples)]
    if not len(samples):
        return math.nan, math.nan
    lo, hi = np.percentile(samples, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def bootstrap_variance(g: np.ndarray, resamples: int = 1000, seed: int = 0) -> Tuple[float, float]:
    """Bootstrap 95 % interval of the total variance of the rows of ``g`` (n, d)."""
    if len(g) < 2:
        return math.nan, math.nan
    return _interval(_weighted_variances(g, _resample_weights(len(g), resamples, seed)))


def bootstrap_ratio(g: np.ndarray, h: np.ndarray, resamples: int = 1000, seed: int = 0) -> Tuple[float, float]:
    """Bootstrap 95 % interval of ``variance(g) / variance(h)``, resampling the paired rows."""
    if len(g) < 2:
        return math.nan, math.nan
    w = _resample_weights(len(g), resamples, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _interval(_weighted_variances(g, w) / _weighted_variances(h, w))


def _finite_rows(*arrays: Optional[np.ndarray]) -> np.ndarray:
    ok = np.ones(len(arrays[0]), bool)
    for a in arrays:
        if a is not None:
            ok &= np.all(np.isfinite(a), axis=1)
    return ok


def horizon_stats(
    g: np.ndarray, ref: np.ndarray, exact: Optional[np.ndarray], resamples: int, seed: int
) -> Dict[str, float]:
    """Statistics of per-start gradients ``g`` (N, d) against the reference (N, d) and,
    where given, the exact gradients (N, d) of the same starts."""
    g = np.asarray(g, np.float64)
    ok = _finite_rows(g)
    out = {"nonfinite": int(np.sum(~ok)), "grad_dim": int(g.shape[1])}
    gf = g[ok]
    out["mean_grad_norm"] = float(np.mean(np.linalg.norm(gf, axis=1))) if len(gf) else math.nan
    out["variance"] = variance_across_seeds(gf) if len(gf) > 1 else math.nan
    out["variance_lo"], out["variance_hi"] = bootstrap_variance(gf, resamples, seed)
    out["variance_ratio"] = out["ratio_lo"] = out["ratio_hi"] = math.nan
    if exact is not None:
        both = _finite_rows(g, exact)
        if np.sum(both) > 1:
            with np.errstate(divide="ignore", invalid="ignore"):
                out["variance_ratio"] = float(
                    np.float64(variance_across_seeds(g[both])) / variance_across_seeds(exact[both])
                )
            out["ratio_lo"], out["ratio_hi"] = bootstrap_ratio(g[both], exact[both], resamples, seed)
    with_ref = _finite_rows(g, ref)
    if np.any(with_ref):
        gr, rr = g[with_ref], np.asarray(ref, np.float64)[with_ref]
        out["cosine_to_reference"] = float(np.mean([cosine(a, b) for a, b in zip(gr, rr)]))
        rel = np.linalg.norm(gr - rr, axis=1) / (np.linalg.norm(rr, axis=1) + 1e-12)
        out["rel_error_to_reference"] = float(np.mean(rel))
    else:
        out["cosine_to_reference"] = out["rel_error_to_reference"] = math.nan
    return out
