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
    (("bcg", True, 2, 3), (True, 2)),  # a new trigger restarts the window
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
