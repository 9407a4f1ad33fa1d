"""A scripted (non-learned) BoxPush-v0 controller: face pushes steered by the contact point.

The pusher-box contact is frictionless, so the pusher can only press along a face normal;
the box slides along that normal and turns with the torque ``force * offset`` of the
contact point from the face centre. The controller, a pure function of the observation:

* **turn** (yaw error above ``TURN_YAW``): press gently (0.7 N, below the 0.8 N table
  friction of each slide, above the 0.01 N m yaw friction at a 4 cm offset) near a corner
  of the face nearest the pusher: the box turns in place;
* **push** (yaw aligned, box more than ``DONE_DISTANCE`` from the goal): press the face
  whose push moves the box most toward the goal (the table friction acts per world axis,
  so the box slides only along the world axes its push exceeds 0.8 N on), keeping the
  face it is at while that still makes progress, with a speed command that fades to
  zero at the goal (table friction stops the box within millimetres) and a contact offset
  that steers the yaw back to the goal yaw;
* **hold**: back off 12 cm from the box and brake.

The pusher travels around the box on a 13 cm circle (clear of the corners) to reach a
face, then approaches it along the normal. Measure it with
``python -m bcg_envs.envs.box_push.scripted --episodes 100`` (MuJoCo C backend).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from bcg_envs.envs.resources import trained_policy_path
from bcg_envs.numpy_policy import NumpyPolicy

#: Box half size and pusher radius (m), as in box_push.xml.
HALF, PUSHER_R = 0.05, 0.025
#: Yaw error (rad) above which the box is turned in place before pushing.
TURN_YAW = 0.12
#: Box-goal distance (m) below which the box is left alone.
DONE_DISTANCE = 0.008
#: Radius (m) of the circle the pusher travels around the box.
ORBIT = 0.13
_FACES = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])


def _rot(yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s], [s, c]])


def _wrap(a: float) -> float:
    return (a + np.pi) % (2 * np.pi) - np.pi


def _goto(pusher, vel, target) -> np.ndarray:
    """Drive the pusher to ``target`` at up to 0.5 m/s (feed-forward of its 2 N s/m damping
    plus a velocity loop)."""
    v_des = 6.0 * (target - pusher)
    speed = np.linalg.norm(v_des)
    if speed > 0.5:
        v_des *= 0.5 / speed
    return 0.4 * v_des + 3.0 * (v_des - vel)


def _approach(pusher, vel, box, R, normal_b, offset, rel_b) -> Optional[np.ndarray]:
    """Travel to the face ``normal_b`` at contact offset ``offset``; ``None`` once lined up
    outside the face (ready to press)."""
    tangent_b = np.array([-normal_b[1], normal_b[0]])
    out = rel_b @ normal_b  # pusher distance outside the face plane (from the centre)
    lateral = rel_b @ tangent_b - offset
    if out > HALF + PUSHER_R - 0.01 and abs(lateral) < 0.01:
        return None
    phi_p = np.arctan2(rel_b[1], rel_b[0])
    phi_t = np.arctan2(normal_b[1], normal_b[0])
    diff = _wrap(phi_t - phi_p)
    if abs(diff) > 0.5 or out < HALF + PUSHER_R - 0.01:
        # Around the box on the orbit, never cutting a corner.
        step = phi_p + np.clip(diff, -0.6, 0.6)
        radius = max(ORBIT, np.linalg.norm(rel_b)) if abs(diff) > 0.5 else ORBIT
        target = box + R @ (radius * np.array([np.cos(step), np.sin(step)]))
        if abs(diff) <= 0.5:
            target = box + R @ (normal_b * ORBIT * 0.8 + tangent_b * offset)
        return _goto(pusher, vel, target)
    target = box + R @ (normal_b * (HALF + PUSHER_R + 0.02) + tangent_b * offset)
    return _goto(pusher, vel, target)


def _press(vel, R, normal_b, offset, rel_b, force: float) -> np.ndarray:
    """Push along -normal with ``force`` (action units, 5 N each), holding the offset."""
    tangent_b = np.array([-normal_b[1], normal_b[0]])
    lateral = rel_b @ tangent_b - offset
    normal_w = R @ normal_b
    closing = -vel @ normal_w  # pusher speed toward the face
    gap = rel_b @ normal_b - HALF - PUSHER_R
    # Approach at most 5 cm/s (a stiff contact bounces a fast pusher off), then press.
    push = force + 2.0 * (min(0.05, 2.0 * max(gap, 0.0) + 0.01) - closing)
    a_b = -normal_b * max(push, 0.0) - tangent_b * (30.0 * lateral)
    return R @ a_b - 1.0 * (vel - (vel @ normal_w) * normal_w)


def scripted_push(obs: np.ndarray) -> np.ndarray:
    """Action (2,) in [-1, 1] for a BoxPush-v0 observation (17,); see the module docstring."""
    obs = np.asarray(obs, np.float64)
    vel, box = obs[2:4], obs[4:6]
    pusher = box - obs[13:15]
    yaw = np.arctan2(obs[7], obs[6])
    box_vel, yaw_rate = obs[8:10], obs[10]
    to_goal = obs[11:13]
    yaw_err = np.arctan2(obs[16], obs[15])  # yaw - goal yaw
    R = _rot(yaw)
    rel_b = R.T @ (pusher - box)
    dist = np.linalg.norm(to_goal)

    if abs(yaw_err) > TURN_YAW:
        normal_b = _FACES[np.argmax(_FACES @ rel_b)]
        offset = -np.sign(yaw_err) * 0.04  # torque = force * offset about +z
        act = _approach(pusher, vel, box, R, normal_b, offset, rel_b)
        if act is None:
            act = _press(vel, R, normal_b, offset, rel_b, 0.14 if abs(yaw_rate) < 1.0 else 0.0)
    elif dist > DONE_DISTANCE:
        # Press a face whose inward normal points to the goal; keep the face the pusher is
        # at while it still has distance to cover (fewer trips around the box).
        # The table friction acts per world axis (0.8 N on each slide), so a push slides
        # the box only along the world axes its force exceeds 0.8 N on: the box moves
        # along ``motion``, not along the face normal.
        push_w = _FACES @ R.T  # inward force direction of each face's push, world frame
        motion = push_w * (np.abs(push_w) > 0.67)
        motion /= np.linalg.norm(motion, axis=1, keepdims=True)
        along_all = motion @ to_goal
        current = np.argmax(_FACES @ rel_b)
        pick = (current + 2) % 4
        if along_all[pick] < 0.006:
            pick = int(np.argmax(along_all))
        normal_b = -_FACES[pick]
        along = along_all[pick]  # distance still to go along the box's motion
        offset = float(np.clip(-0.15 * yaw_err - 0.02 * yaw_rate, -0.02, 0.02))
        act = _approach(pusher, vel, box, R, normal_b, offset, rel_b)
        if act is None:
            if along < 0.004:
                act = _goto(pusher, vel, box + R @ (normal_b * (HALF + PUSHER_R + 0.03)))
            else:
                v_des = min(0.3, 2.0 * along)
                speed = motion[pick] @ box_vel
                act = _press(vel, R, normal_b, offset, rel_b, float(np.clip(0.25 + 3.0 * (v_des - speed), 0.0, 1.0)))
    else:
        normal_b = _FACES[np.argmax(_FACES @ rel_b)]
        act = _goto(pusher, vel, box + R @ (normal_b * 0.12))
    return np.clip(act, -1.0, 1.0).astype(np.float32)


def escape(obs: np.ndarray) -> np.ndarray:
    """The fastest way to end an episode: full force through the box, away from the pusher
    (the box leaves the table in ~17 steps). Scoring tests check it never pays."""
    return (obs[13:15] / (np.linalg.norm(obs[13:15]) + 1e-9)).astype(np.float32)


def do_nothing(obs: np.ndarray) -> np.ndarray:
    """Zero force every step."""
    return np.zeros(2, np.float32)


#: Named policies of ``python -m bcg_envs.envs.box_push.scripted --policy NAME``; ``trained``
#: and ``trained_shac`` are the shipped learned policies (SB3 PPO and SHAC exact, the same env
#: steps each; ``bcg_envs.export.trained_policy``), reference points beside the script.
POLICIES = {
    "scripted": lambda: scripted_push,
    "nothing": lambda: do_nothing,
    "escape": lambda: escape,
    "trained": lambda: NumpyPolicy.load(trained_policy_path("BoxPush-v0", "sb3_ppo")),
    "trained_shac": lambda: NumpyPolicy.load(trained_policy_path("BoxPush-v0", "shac_exact")),
}


if __name__ == "__main__":
    from bcg_envs.envs.evaluation import main

    main("BoxPush-v0", POLICIES, "Success rate and return of BoxPush-v0's scripted and shipped policies.")
