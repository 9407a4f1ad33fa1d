"""bcg_envs.gradients.trigger: one bundle/window rule for both backends (JAX and NumPy)."""

import jax.numpy as jnp
import numpy as np
import pytest

from bcg_envs.gradients.registry import resolve
from bcg_envs.gradients.trigger import bundle_decision, bundle_decision_scalar

# (estimator, pressing, window before, horizon) -> (bundles, next window)
CASES = [
    (("bcg", True, 0, 2), (True, 1)),  # a trigger opens a window of H - 1 more steps
    (("bcg", False, 1, 2), (True, 0)),  # inside the window: still bundled
    (("bcg", False, 0, 2), (False, 0)),  # nothing pressing, no window: exact
    (("bcg", True, 2, 3), (True, 1)),  # a trigger inside a window does not restart it
    (("bcg", True, 1, 2), (True, 0)),  # the window ends on schedule
    (("bcg", True, 0, 1), (True, 0)),  # H = 1: one-step bundles
    (("exact", True, 0, 2), (False, 0)),
    (("bundle", False, 0, 2), (True, 0)),
    (("zeroth", False, 3, 2), (True, 0)),
]


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax"])
@pytest.mark.parametrize("args, expected", CASES)
def test_bundle_decision(xp, args, expected):
    bundles, window = bundle_decision(*args, xp=xp)
    assert (bool(bundles), int(window)) == expected


@pytest.mark.parametrize("args, expected", CASES)
def test_bundle_decision_scalar(args, expected):
    """The MuJoCo C backend's memoized form: the same rule, as a Python bool and int."""
    name, *rest = args
    bundles, window = bundle_decision_scalar(resolve(name), *rest)
    assert (type(bundles), type(window)) == (bool, int)
    assert (bundles, window) == expected


def bundled_steps(pressing, horizon):
    """The steps ``bcg`` bundles over a sequence of trigger decisions, one rule per step."""
    window, out = 0, []
    for p in pressing:
        bundles, window = bundle_decision_scalar(resolve("bcg"), bool(p), window, horizon)
        out.append(int(bundles))
    return out


@pytest.mark.parametrize(
    "pressing, horizon, expected",
    [
        ([1, 1, 0], 2, [1, 1, 0]),  # the second trigger falls inside the first window
        ([1, 1, 1, 0, 0], 3, [1, 1, 1, 0, 0]),  # a restarting rule would bundle 5 steps
        ([1, 0, 1, 1, 1], 2, [1, 1, 1, 1, 1]),  # windows open again once the last one ends
        ([0, 1, 0, 0], 2, [0, 1, 1, 0]),
        ([1, 1, 0, 1], 1, [1, 1, 0, 1]),  # H = 1: the trigger steps alone
    ],
)
def test_windows_over_a_sequence(pressing, horizon, expected):
    """The window the MJX branch rollouts run: a trigger inside a window does not restart it."""
    assert bundled_steps(pressing, horizon) == expected
