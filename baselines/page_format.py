"""Numbers as the results page reads them from its CSVs and writes them in its tables."""

from __future__ import annotations

import math


def number(text: str) -> float:
    """A CSV cell as a float; nan where it is blank or not a number."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def two_digits(x: float) -> str:
    """Two significant digits: 0.54, 9.9, 12, 490, 4.5e3, 1.2e6, 1.7e-4."""
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if x == 0:
        return "0"
    if 10 <= abs(x) < 1000:
        return f"{float(f'{x:.2g}'):.0f}"
    if 0.01 <= abs(x) < 10:
        return f"{x:.2g}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def with_interval(row: dict, value: str, low: str, high: str) -> str:
    """``row[value]`` in ``two_digits`` with its interval ``[row[low], row[high]]``; the value
    alone where a bound is not finite or all three print the same."""
    v, lo, hi = number(row[value]), number(row[low]), number(row[high])
    if math.isfinite(lo) and math.isfinite(hi) and not two_digits(lo) == two_digits(v) == two_digits(hi):
        return f"{two_digits(v)} [{two_digits(lo)}, {two_digits(hi)}]"
    return two_digits(v)


def pct(x: float) -> str:
    """A fraction as a percentage with one decimal (0.345 -> "34.5"), without the sign."""
    return f"{100 * x:.1f}"
