"""A scripted (non-learned) PlanarHand-v0 controller: one antipodal grasp, then rolling.

A pure function of the observation, with no finger gaiting (the disc is grasped once):

* **approach**: both fingertips go to points 12 mm outside the disc on a line through its
  centre (an antipodal pair, so the squeeze forces cancel), turned by the yaw error
  within the band of angles both fingers can reach (``antipodal_band``), so that the
  rolling that follows has room to travel;
* **roll** (once both tips are within 22 mm of the disc): the tips aim 12 mm inside the disc
  surface (the position servos squeeze it) and step around the disc centre against the
  yaw error (``ROLL_GAIN`` times the error, at most ``ROLL_STEP`` rad a step, kept inside
  the band); friction carries the disc round with them. Their targets are also shifted
  toward the palm centre (``CENTRE_GAIN``), which keeps the disc from drifting out of reach.

Joint targets come from the analytic inverse kinematics of the two-link fingers (lengths
and base positions as in ``assets/planar_hand/planar_hand.xml``). The default target
range (+-60 degrees) is within the band; the +-150 degree setting
(``config={"goal_yaw_range": np.deg2rad(150)}``) needs regrasping, which this controller
does not do. Measure it with ``python -m bcg_envs.envs.planar_hand.scripted --episodes 100``.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from bcg_envs.envs.planar_hand.hand import DISC_RADIUS, TIP_RADIUS

#: Finger geometry (m), as in planar_hand.xml: proximal link, distal link to the tip centre,
#: base x (+-) and y.
LINK1, LINK2, BASE_X, BASE_Y = 0.07, 0.06, 0.05, -0.10
#: Joint ranges (rad): proximal, distal (both fingers; positive curls inward).
Q_LO, Q_HI = np.array([-1.0, -1.0]), np.array([1.0, 2.2])
#: Tip targets outside the disc while approaching / inside it while rolling (m).
PRE_GAP, SQUEEZE = 0.012, 0.012
#: Both tips within this gap (m) of the disc surface starts the roll.
READY_GAP = 0.022
ROLL_GAIN, ROLL_STEP = 2.5, 0.35
CENTRE_GAIN = 0.7
#: Angular margin (rad) kept from the edges of the reachable band.
MARGIN = 0.04
_GRID = np.deg2rad(np.arange(-150.0, 151.0, 2.0))


def finger_ik(points: np.ndarray, side: int) -> Tuple[np.ndarray, np.ndarray]:
    """Joint angles (..., 2) putting a fingertip centre at ``points`` (..., 2), elbow curled
    inward, clipped to the joint ranges; and whether each point is reachable unclipped.
    ``side``: +1 right finger, -1 left finger."""
    v = np.asarray(points, np.float64) - np.array([BASE_X * side, BASE_Y])
    inward, up = -side * v[..., 0], v[..., 1]
    c2 = (inward**2 + up**2 - LINK1**2 - LINK2**2) / (2 * LINK1 * LINK2)
    ok = np.abs(c2) <= 1.0
    q2 = np.arccos(np.clip(c2, -1.0, 1.0))
    q1 = np.arctan2(inward, up) - np.arctan2(LINK2 * np.sin(q2), LINK1 + LINK2 * np.cos(q2))
    q = np.stack([q1, q2], -1)
    ok &= np.all((q >= Q_LO) & (q <= Q_HI), -1)
    return np.clip(q, Q_LO, Q_HI), ok


def _reach(centre: np.ndarray, side: int, radius: float) -> Optional[Tuple[float, float]]:
    """The contiguous band of angles around ``centre`` at ``radius`` one fingertip reaches
    (angles from +x; the left finger's band is about pi)."""
    angles = _GRID if side == 1 else np.pi - _GRID
    points = centre + radius * np.stack([np.cos(angles), np.sin(angles)], -1)
    _, ok = finger_ik(points, side)
    if not ok.any():
        return None
    idx = np.flatnonzero(ok)
    lo = hi = int(idx[np.argmin(np.abs(idx - len(_GRID) // 2))])
    while lo > 0 and ok[lo - 1]:
        lo -= 1
    while hi < len(ok) - 1 and ok[hi + 1]:
        hi += 1
    a, b = angles[lo], angles[hi]
    return min(a, b), max(a, b)


def antipodal_band(centre: np.ndarray, radius: float) -> Tuple[float, float]:
    """Angles ``a`` (rad) for which the right tip reaches ``a`` and the left tip ``a + pi``
    on a circle of ``radius`` around ``centre`` (``(0, 0)`` if none)."""
    right, left = _reach(centre, 1, radius), _reach(centre, -1, radius)
    if right is None or left is None:
        return 0.0, 0.0
    return max(right[0], left[0] - np.pi), min(right[1], left[1] - np.pi)


def _to_action(q: np.ndarray) -> np.ndarray:
    mid, half = (Q_LO + Q_HI) / 2, (Q_HI - Q_LO) / 2
    return (q - mid) / half


def scripted_rotate(obs: np.ndarray) -> np.ndarray:
    """Action (4,) in [-1, 1] for a PlanarHand-v0 observation (21,); see the module docstring."""
    obs = np.asarray(obs, np.float64)
    centre = obs[8:10]  # disc xy relative to the palm centre
    err = np.arctan2(obs[16], obs[15])  # disc yaw - target
    tips = obs[17:21].reshape(2, 2)  # left, right tip relative to the disc centre
    contact = DISC_RADIUS + TIP_RADIUS
    gaps = np.linalg.norm(tips, axis=1) - contact
    lo, hi = antipodal_band(centre, contact)
    lo, hi = lo + MARGIN, hi - MARGIN
    if np.all(gaps < READY_GAP):
        right = np.arctan2(tips[1, 1], tips[1, 0])
        left = np.arctan2(-tips[0, 1], -tips[0, 0])  # the left tip's angle minus pi
        now = np.arctan2(np.sin(right) + np.sin(left), np.cos(right) + np.cos(left))
        angle = np.clip(now - np.clip(ROLL_GAIN * err, -ROLL_STEP, ROLL_STEP), lo, hi)
        radius = contact - SQUEEZE
    else:
        pre_lo, pre_hi = antipodal_band(centre, contact + PRE_GAP)
        lo, hi = max(lo, pre_lo + MARGIN), min(hi, pre_hi - MARGIN)
        mid, half = (lo + hi) / 2, max((hi - lo) / 2, 0.0)
        angle = mid + np.clip(err, -half, half)
        radius = contact + PRE_GAP
    base = (1.0 - CENTRE_GAIN) * centre
    action = []
    for side, a in ((-1, angle + np.pi), (1, angle)):
        q, _ = finger_ik(base + radius * np.array([np.cos(a), np.sin(a)]), side)
        action.append(_to_action(q))
    return np.clip(np.concatenate(action), -1.0, 1.0).astype(np.float32)


class Strikes:
    """The fastest way to end an episode: open the hand, then curl the right finger hard
    into the disc, every 20 steps; the strikes throw the disc out of reach (the fingers
    cannot push it that far). The step count restarts at a reset observation (all joint
    velocities exactly zero). Scoring tests check it never pays."""

    def __init__(self) -> None:
        self.t = 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.t = 0 if np.all(obs[4:8] == 0) else self.t + 1
        return (np.array([-1, -1, 1, 1.0]) if self.t % 20 >= 10 else -np.ones(4)).astype(np.float32)


def do_nothing(obs: np.ndarray) -> np.ndarray:
    """Hold the neutral grasp targets (action 0) every step."""
    return np.zeros(4, np.float32)


#: Named policies of ``python -m bcg_envs.envs.planar_hand.scripted --policy NAME``.
POLICIES = {"scripted": lambda: scripted_rotate, "nothing": lambda: do_nothing, "escape": Strikes}


if __name__ == "__main__":
    from bcg_envs.envs.evaluation import main

    main("PlanarHand-v0", POLICIES, "Success rate and return of PlanarHand-v0's scripted policies.")
