"""The simulation-divergence check, one definition for both physics backends.

A step whose end state has diverged is reverted and ends the episode (``info["sim_diverged"]``);
a bcg branch rollout that diverges is dropped. A state has diverged when a position,
velocity or actuator activation is not finite, or a joint speed reaches ``MAX_QVEL``: a
state that fast is taken to be blowing up, well before MuJoCo's own check (``mjMAXVAL`` =
1e10) resets the data.

``diverged`` takes NumPy or JAX arrays (batched over leading axes); ``diverged_lists`` is
the same predicate on one state as Python float lists, the MuJoCo C single-env step's hot
path (a pure-Python loop over a few numbers beats NumPy's per-call overhead there).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any, Optional, Sequence

import numpy as np

#: A state whose joint speed reaches this (rad/s or m/s) counts as diverged.
MAX_QVEL = 1e3


def diverged(qpos: Any, qvel: Any, act: Optional[Any] = None, *, xp: ModuleType = np) -> Any:
    """Whether a state has diverged: some entry of ``qpos`` (generalized positions, m or
    rad, or quaternion entries), ``qvel`` (rad/s or m/s) or ``act`` (actuator activations)
    is not finite, or some ``|qvel|`` >= ``MAX_QVEL``.

    Arrays are ``(..., nq)``, ``(..., nv)``, ``(..., na)``; the result is a boolean of
    shape ``...`` (one per state of a batch). ``act=None`` is a model without
    activations. ``xp`` is ``numpy`` or ``jax.numpy`` (traceable: no Python branching on
    values)."""
    # |qvel| < MAX_QVEL is False for NaN, so it also requires a finite qvel.
    ok = xp.all(xp.isfinite(qpos), axis=-1) & xp.all(xp.abs(qvel) < MAX_QVEL, axis=-1)
    if act is not None:
        ok = ok & xp.all(xp.isfinite(act), axis=-1)
    return ~ok


def diverged_lists(qpos: Sequence[float], qvel: Sequence[float], act: Sequence[float] = ()) -> bool:
    """``diverged`` of one state given as Python floats (``ndarray.tolist()``): the same
    predicate, several times faster than NumPy on the few numbers of one MuJoCo C state."""
    if not all(-MAX_QVEL < v < MAX_QVEL for v in qvel):  # False for NaN
        return True
    isfinite = math.isfinite
    return not (all(map(isfinite, qpos)) and all(map(isfinite, act)))
