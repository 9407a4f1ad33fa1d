"""When an estimator bundles a step, and the ``bcg`` window that follows a trigger.

Written once for both physics backends: the MJX step calls these with JAX arrays (inside
``jit``), the MuJoCo C backend with Python scalars (``bundle_decision_scalar``). ``xp`` is
the array module (``jax.numpy`` or ``numpy``).
"""

from __future__ import annotations

import functools
from typing import Any, Tuple, Union

import jax.numpy as jnp
import numpy as np

from bcg_envs.gradients.registry import Estimator, resolve


def bundle_decision(
    estimator: Union[str, Estimator], pressing: Any, window: Any, horizon: int, xp: Any = jnp
) -> Tuple[Any, Any]:
    """``(bundles, next_window)`` of one control step.

    ``bcg`` bundles where a contact event fires the trigger (``pressing``: some event's
    force, or its rise, above ``BundleConfig.force_threshold``) and on the ``horizon - 1``
    steps after it (``window`` counts the steps still to go in a branch rollout). A
    trigger inside a window does not restart it: the branch rollout in flight already
    covers that step, and a window opens again at the first trigger after it ends.
    ``exact`` never bundles; ``bundle``, ``zeroth`` and ``alpha`` bundle every step. The
    window is 0 for every estimator but ``bcg``.

    Args:
      estimator: the step's ``Estimator`` (or its name).
      pressing: bool, whether a contact event fires the trigger at this step.
      window: int >= 0, the steps left in the current window before this step.
      horizon: ``BundleConfig.horizon`` (H control steps per branch rollout).
    """
    est = resolve(estimator)
    if not est.triggered:
        return xp.asarray(est.samples), xp.zeros((), xp.int32)
    window = xp.asarray(window)
    opens = xp.asarray(pressing) & (window == 0)
    bundles = opens | (window > 0)
    next_window = xp.where(opens, horizon - 1, xp.maximum(window - 1, 0)).astype(xp.int32)
    return bundles, next_window


@functools.cache
def bundle_decision_scalar(estimator: Estimator, pressing: bool, window: int, horizon: int) -> Tuple[bool, int]:
    """``bundle_decision`` on Python scalars, memoized: a pure function of a few discrete
    arguments (``window < horizon``), so each case runs the shared NumPy code once instead
    of ~10 us of array calls per step."""
    bundles, window = bundle_decision(estimator, pressing, window, horizon, xp=np)
    return bool(bundles), int(window)
