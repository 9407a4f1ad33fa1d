"""Small statistics shared by the evaluations: success rates with Wilson intervals."""

from __future__ import annotations

import math
from typing import Dict, Sequence, Tuple


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> Tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % for ``z = 1.96``).

    Unlike the normal approximation it stays inside [0, 1] and is informative at 0 % and
    100 %, the usual outcomes of a small evaluation.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be in [0, trials={trials}], got {successes}")
    p = successes / trials
    denom = 1.0 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def success_summary(successes: Sequence[bool]) -> Dict[str, float]:
    """``success_rate`` and its 95 % Wilson interval (``success_low``, ``success_high``)."""
    n = len(successes)
    k = int(sum(bool(s) for s in successes))
    low, high = wilson_interval(k, n)
    return {"success_rate": k / n, "success_low": low, "success_high": high}


def format_success(summary: Dict[str, float]) -> str:
    """``"85.0 % [76.7, 90.7]"`` from a ``success_summary``."""
    return (
        f"{100 * summary['success_rate']:.1f} % "
        f"[{100 * summary['success_low']:.1f}, {100 * summary['success_high']:.1f}]"
    )
