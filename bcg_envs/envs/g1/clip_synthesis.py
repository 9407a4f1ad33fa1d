"""Offline synthesis of the G1 reference clips shipped in ``assets/motions``.

This is how the committed ``g1_jump.csv``, ``g1_squat.csv`` and ``g1_kick.csv`` were made;
the environments never import it (they load the CSV files through
:mod:`bcg_envs.envs.g1.motions`). ``make_clip(name)`` builds a clip from a handful of
keyframes:

* keyframes are interpolated with minimum-jerk easing (zero velocity and acceleration at
  each keyframe, never overshooting), or with an ease-in / ease-out profile on the jump's
  push-off and landing;
* support feet are kept flat by solving the two ankle angles analytically from forward
  kinematics, and for balanced keyframes the root pitch (and, on one foot, a lateral hip
  roll shift) is solved so that the whole-body COM lies over the support;
* the root position of every frame comes from forward kinematics of ``g1.xml`` (CPU
  MuJoCo, float64): while feet are on the ground the lowest sphere of the support feet sits
  at z=0 and the support feet do not slide; during the jump's flight the root follows a
  ballistic parabola.

Root orientations are quaternions (w, x, y, z) throughout (:mod:`.quaternions`); the
scalar-last order of the files is applied by :func:`.motions.save_csv`.

Run ``python -m bcg_envs.envs.g1.clip_synthesis [out_dir]`` to regenerate the CSV files
(default: ``assets/motions``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import constants as C
from .motions import CLIP_NAMES, DEFAULT_FPS, MotionClip, PathLike, clip_path, load_csv, save_csv
from .quaternions import quat_from_pitch

#: Gravity (m/s^2) of the jump's ballistic flight phase.
GRAVITY = 9.81

# --------------------------------------------------------------------------------------
# Forward kinematics on g1.xml
# --------------------------------------------------------------------------------------

_SIDES = ("left", "right")
_LEG_OFFSET = {"left": 0, "right": 6}


class G1Kinematics:
    """Forward kinematics helpers on the G1 MJCF (CPU MuJoCo)."""

    def __init__(self, xml_path: PathLike = C.G1_XML):
        import mujoco

        self._mj = mujoco
        self.model = mujoco.MjModel.from_xml_path(str(xml_path))
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.qadr = np.array([m.jnt_qposadr[m.joint(n).id] for n in C.JOINT_NAMES])
        self.lower = np.array([m.jnt_range[m.joint(n).id][0] for n in C.JOINT_NAMES])
        self.upper = np.array([m.jnt_range[m.joint(n).id][1] for n in C.JOINT_NAMES])
        geoms = {"left": C.LEFT_FOOT_GEOMS, "right": C.RIGHT_FOOT_GEOMS}
        self.sphere_ids = {s: np.array([m.geom(g).id for g in geoms[s]]) for s in _SIDES}
        self.sphere_radius = {s: m.geom_size[self.sphere_ids[s], 0].copy() for s in _SIDES}
        self.foot_site = {s: m.site(f"{s}_foot").id for s in _SIDES}
        self.knee_body = {s: m.body(f"{s}_knee_link").id for s in _SIDES}
        self.foot_body = {s: m.body(f"{s}_ankle_roll_link").id for s in _SIDES}
        ankle_quat = {s: m.body_quat[m.body(f"{s}_ankle_pitch_link").id] for s in _SIDES}
        self._ankle_rot = {}
        for s in _SIDES:
            mat = np.zeros(9)
            mujoco.mju_quat2Mat(mat, ankle_quat[s])
            self._ankle_rot[s] = mat.reshape(3, 3)

    def set(self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray) -> None:
        """Set the pose (root quaternion w, x, y, z) and run kinematics + COM computation."""
        d = self.data
        d.qpos[:3] = root_pos
        d.qpos[3:7] = root_quat
        d.qpos[self.qadr] = joint_pos
        self._mj.mj_kinematics(self.model, d)
        self._mj.mj_comPos(self.model, d)

    def sphere_bottoms(self, side: str) -> np.ndarray:
        """z of the lowest point of each foot sphere of `side` (current pose)."""
        ids = self.sphere_ids[side]
        return self.data.geom_xpos[ids, 2] - self.sphere_radius[side]

    def foot_site_pos(self, side: str) -> np.ndarray:
        """World position of the ``<side>_foot`` site (current pose)."""
        return self.data.site_xpos[self.foot_site[side]].copy()

    def com(self) -> np.ndarray:
        """Whole-body centre of mass (current pose)."""
        return self.data.subtree_com[1].copy()

    def flat_ankles(self, root_quat: np.ndarray, joint_pos: np.ndarray, sides: Sequence[str]) -> np.ndarray:
        """Joint vector with the soles of `sides` level and pointing straight ahead.

        Ankle pitch/roll: with R_p the orientation of the ankle pitch joint frame (given by
        the joints above it), the sole is level when Ry(pitch) Rx(roll) e_z = R_p^T e_z =: v,
        i.e. roll = -asin(v_y) and pitch = atan2(v_x, v_z). The hip yaw is then corrected so
        the foot heading is zero (a few fixed-point iterations, hip roll couples into yaw).
        """
        q = np.array(joint_pos, dtype=np.float64)
        if not sides:
            return q
        for it in range(6):
            self.set(np.zeros(3), root_quat, q)
            worst = 0.0
            if it:
                for s in sides:
                    r_foot = self.data.xmat[self.foot_body[s]].reshape(3, 3)
                    yaw = math.atan2(r_foot[1, 0], r_foot[0, 0])
                    q[_LEG_OFFSET[s] + 2] -= yaw
                    worst = max(worst, abs(yaw))
                if worst < 1e-7:
                    break
                self.set(np.zeros(3), root_quat, q)
            for s in sides:
                r_knee = self.data.xmat[self.knee_body[s]].reshape(3, 3)
                v = (r_knee @ self._ankle_rot[s]).T @ np.array([0.0, 0.0, 1.0])
                o = _LEG_OFFSET[s]
                q[o + 4] = math.atan2(v[0], v[2])
                q[o + 5] = -math.asin(max(-1.0, min(1.0, v[1])))
        return q

    def foot_heights(self, clip: MotionClip) -> np.ndarray:
        """(T, 2) lowest foot-sphere point (left, right) of every frame of `clip`."""
        out = np.empty((clip.num_frames, 2))
        for i in range(clip.num_frames):
            self.set(clip.root_pos[i], clip.root_quat[i], clip.joint_pos[i])
            out[i] = [self.sphere_bottoms(s).min() for s in _SIDES]
        return out


@functools.lru_cache(maxsize=1)
def _kinematics() -> G1Kinematics:
    return G1Kinematics(C.G1_XML)


def foot_heights(clip: MotionClip) -> np.ndarray:
    """(T, 2) height of the lowest foot-sphere point of the left and right foot per frame."""
    return _kinematics().foot_heights(clip)


# --------------------------------------------------------------------------------------
# Keyframe-based clip synthesis
# --------------------------------------------------------------------------------------

_SUPPORT = {"both": ("left", "right"), "left": ("left",), "right": ("right",), "none": ()}


def _minimum_jerk(tau: float) -> float:
    return tau**3 * (10.0 - 15.0 * tau + 6.0 * tau**2)


def _ease_in(tau: float, power: float) -> float:
    return tau**power


def _ease_out(tau: float, power: float) -> float:
    return 1.0 - (1.0 - tau) ** power


@dataclasses.dataclass
class _Key:
    """A keyframe.

    legs: side -> ("stance", knee, ankle_pitch) with hip pitch = -(root pitch + knee +
    ankle) so the foot is flat under an upright chain, or ("free", hip_pitch, knee,
    ankle_pitch) for a swing / flight leg.
    upper: absolute angles for waist/arm joints by joint name without "_joint".
    pitch: root pitch, or None to solve it so the COM is over the `balance` support.
    shift: lateral shift, set as the hip roll of both legs (ankle rolls follow), or None to
    solve it (single-support balance).
    ankle_shift: added to the ankle pitch of "stance" legs (moves the pelvis fore/aft over
    the feet), or None to solve it for balance instead of the pitch.
    support: feet in contact at this keyframe. contact: feet in contact strictly inside the
    segment that ends at this keyframe (default: feet in contact at both ends).
    flat: keep support feet level at this keyframe (False: ankles as given, e.g. toe-off).
    """

    duration: float
    legs: Dict[str, tuple]
    support: str = "both"
    upper: Dict[str, float] = dataclasses.field(default_factory=dict)
    pitch: Optional[float] = 0.0
    shift: Optional[float] = 0.0
    ankle_shift: Optional[float] = 0.0
    balance: Optional[str] = None
    easing: Tuple[str, float] = ("minjerk", 0.0)
    contact: Optional[str] = None
    flat: bool = True


@dataclasses.dataclass
class _Resolved:
    t: float
    q: np.ndarray
    pitch: float
    support: Tuple[str, ...]
    contact_before: Tuple[str, ...]
    easing: Tuple[str, float]
    flat: bool


_JOINT_INDEX = {n[: -len("_joint")]: i for i, n in enumerate(C.JOINT_NAMES)}


class _Synth:
    """Turns a list of keyframes into a MotionClip (see module docstring)."""

    LIMIT_MARGIN = 0.02  # rad kept away from the joint limits

    def __init__(self, kin: G1Kinematics):
        self.kin = kin
        self.lo = kin.lower + self.LIMIT_MARGIN
        self.hi = kin.upper - self.LIMIT_MARGIN

    # ---- single keyframe ------------------------------------------------------------
    def build(self, key: _Key, pitch: float, shift: float, ankle_shift: float) -> np.ndarray:
        q = C.DEFAULT_POSE.copy()
        for joint, value in key.upper.items():
            q[_JOINT_INDEX[joint]] = value
        for side in _SIDES:
            spec = key.legs[side]
            o = _LEG_OFFSET[side]
            if spec[0] == "stance":
                _, knee, ankle = spec
                ankle = ankle + ankle_shift
                hip = -(pitch + knee + ankle)
            elif spec[0] == "free":
                _, hip, knee, ankle = spec
            else:
                raise ValueError(f"unknown leg mode {spec[0]!r}")
            q[o : o + 6] = [hip, shift, 0.0, knee, ankle, -shift]
        if key.flat:
            q = self.kin.flat_ankles(quat_from_pitch(pitch), q, _SUPPORT[key.support])
        return np.clip(q, self.lo, self.hi)

    def _balance_residual(self, q: np.ndarray, pitch: float, target: str) -> np.ndarray:
        self.kin.set(np.zeros(3), quat_from_pitch(pitch), q)
        com = self.kin.com()
        feet = [self.kin.foot_site_pos(s) for s in _SUPPORT[target]]
        centre = np.mean(feet, axis=0)
        if target == "both":
            return np.array([com[0] - centre[0]])
        return com[:2] - centre[:2]

    def resolve(self, key: _Key) -> Tuple[np.ndarray, float]:
        params = np.array([key.pitch or 0.0, key.shift or 0.0, key.ankle_shift or 0.0])
        free = []
        if key.balance is not None:
            if key.pitch is None:
                free.append(0)
            if key.shift is None and key.balance != "both":
                free.append(1)
            if key.ankle_shift is None:
                free.append(2)
        if free:

            def residual(p):
                return self._balance_residual(self.build(key, *p), p[0], key.balance)

            for _ in range(30):
                r = residual(params)
                if np.max(np.abs(r)) < 1e-5:
                    break
                jac = np.empty((r.size, len(free)))
                for j, idx in enumerate(free):
                    dp = params.copy()
                    dp[idx] += 1e-5
                    jac[:, j] = (residual(dp) - r) / 1e-5
                step = np.linalg.lstsq(jac, -r, rcond=None)[0]
                params[free] += np.clip(step, -0.1, 0.1)
            else:
                raise RuntimeError("keyframe balance solve did not converge")
        return self.build(key, *params), float(params[0])

    # ---- trajectory -----------------------------------------------------------------
    def resolve_all(self, keys: Sequence[_Key]) -> List[_Resolved]:
        out: List[_Resolved] = []
        t = 0.0
        prev_support: Tuple[str, ...] = ()
        for k, key in enumerate(keys):
            t += key.duration if k else 0.0
            q, pitch = self.resolve(key)
            support = _SUPPORT[key.support]
            if key.contact is not None:
                contact = _SUPPORT[key.contact]
            else:
                contact = tuple(s for s in support if s in prev_support)
            out.append(_Resolved(t, q, pitch, support, contact, key.easing, key.flat))
            prev_support = support
        return out

    def pose_at(self, res: List[_Resolved], t: float):
        """(segment index k, joints, pitch, contact feet) at time t (segment k ends at key k)."""
        if t <= res[0].t + 1e-9:
            return 0, res[0].q.copy(), res[0].pitch, res[0].support
        for k in range(1, len(res)):
            a, b = res[k - 1], res[k]
            if t <= b.t + 1e-9:
                if abs(t - b.t) <= 1e-9:
                    return k, b.q.copy(), b.pitch, b.support
                tau = (t - a.t) / (b.t - a.t)
                kind, power = b.easing
                if kind == "minjerk":
                    s = _minimum_jerk(tau)
                elif kind == "ease_in":
                    s = _ease_in(tau, power)
                elif kind == "ease_out":
                    s = _ease_out(tau, power)
                else:
                    raise ValueError(kind)
                q = a.q + s * (b.q - a.q)
                pitch = a.pitch + s * (b.pitch - a.pitch)
                contact = b.contact_before
                if a.flat and b.flat and contact:
                    q = self.kin.flat_ankles(quat_from_pitch(pitch), q, contact)
                return k, np.clip(q, self.lo, self.hi), pitch, contact
        last = res[-1]
        return len(res) - 1, last.q.copy(), last.pitch, last.support

    def _relative(self, q: np.ndarray, pitch: float):
        """Foot geometry with the root at the origin."""
        self.kin.set(np.zeros(3), quat_from_pitch(pitch), q)
        bottoms = {s: self.kin.sphere_bottoms(s).copy() for s in _SIDES}
        sites = {s: self.kin.foot_site_pos(s)[:2] for s in _SIDES}
        return bottoms, sites

    def _anchors(self, res: List[_Resolved]) -> List[Dict[str, np.ndarray]]:
        """Planted foot positions (xy) valid in each segment; the root starts at x=y=0."""
        _, sites0 = self._relative(res[0].q, res[0].pitch)
        anchors = {s: sites0[s].copy() for s in _SIDES}
        per_segment = [dict(anchors)]
        for k in range(1, len(res)):
            b = res[k]
            staying = b.contact_before
            touching = [s for s in b.support if s not in staying]
            if touching and staying:
                _, sites = self._relative(b.q, b.pitch)
                root_xy = np.mean([anchors[s] - sites[s] for s in staying], axis=0)
                for s in touching:
                    anchors[s] = root_xy + sites[s]
            per_segment.append(dict(anchors))
        return per_segment

    def _contact_root(self, q, pitch, contact, anchors) -> np.ndarray:
        bottoms, sites = self._relative(q, pitch)
        z = -min(bottoms[s].min() for s in contact)
        xy = np.mean([anchors[s] - sites[s] for s in contact], axis=0)
        return np.array([xy[0], xy[1], z])

    def root_at(self, res, anchors, t: float) -> Tuple[np.ndarray, np.ndarray, float]:
        k, q, pitch, contact = self.pose_at(res, t)
        # Anchors after processing key k apply at key k itself and in segment k+1.
        seg_anchors = anchors[k]
        if contact:
            root = self._contact_root(q, pitch, contact, seg_anchors)
        else:
            # Flight: ballistic between the last key before and the first key after.
            k0 = k - 1
            while not res[k0].support:
                k0 -= 1
            k1 = k
            while not res[k1].support:
                k1 += 1
            r0 = self._contact_root(res[k0].q, res[k0].pitch, res[k0].support, anchors[k0])
            r1 = self._contact_root(res[k1].q, res[k1].pitch, res[k1].support, anchors[k1])
            t0, t1 = res[k0].t, res[k1].t
            span = t1 - t0
            u = t - t0
            v0 = (r1[2] - r0[2]) / span + 0.5 * GRAVITY * span
            root = r0 + (r1 - r0) * (u / span)
            root[2] = r0[2] + v0 * u - 0.5 * GRAVITY * u * u
        # Never let any foot sphere go below the floor.
        bottoms, _ = self._relative(q, pitch)
        lowest = min(bottoms[s].min() for s in _SIDES) + root[2]
        if lowest < 0.0:
            root[2] -= lowest
        return root, q, pitch

    def synthesize(self, keys: Sequence[_Key], fps: float, name: str) -> MotionClip:
        res = self.resolve_all(keys)
        anchors = self._anchors(res)
        n = int(math.floor(res[-1].t * fps + 1e-9)) + 1
        root_pos = np.empty((n, 3))
        quat = np.empty((n, 4))
        joints = np.empty((n, C.NUM_JOINTS))
        for i in range(n):
            root, q, pitch = self.root_at(res, anchors, i / fps)
            root_pos[i] = root
            quat[i] = quat_from_pitch(pitch)
            joints[i] = q
        return MotionClip(fps=fps, root_pos=root_pos, root_quat=quat, joint_pos=joints, name=name)

    # ---- helpers for velocity matching ----------------------------------------------
    def height_rate(self, key_a: _Key, key_b: _Key, s: float, contact: Tuple[str, ...]) -> float:
        """d(root z)/ds of the contact-constrained root along the a->b blend at s."""
        qa, pa = self.resolve(key_a)
        qb, pb = self.resolve(key_b)
        h = 1e-4
        s0, s1 = (s - h, s) if s >= 1.0 else (s, s + h)
        zs = []
        for si in (s0, s1):
            q = qa + si * (qb - qa)
            p = pa + si * (pb - pa)
            bottoms, _ = self._relative(q, p)
            zs.append(-min(bottoms[c].min() for c in contact))
        return (zs[1] - zs[0]) / h


# ---- the three clips ------------------------------------------------------------------


def _arms(pitch_l, roll_l, elbow_l, pitch_r=None, roll_r=None, elbow_r=None) -> Dict[str, float]:
    pitch_r = pitch_l if pitch_r is None else pitch_r
    roll_r = -roll_l if roll_r is None else roll_r
    elbow_r = elbow_l if elbow_r is None else elbow_r
    return {
        "left_shoulder_pitch": pitch_l,
        "left_shoulder_roll": roll_l,
        "left_elbow": elbow_l,
        "right_shoulder_pitch": pitch_r,
        "right_shoulder_roll": roll_r,
        "right_elbow": elbow_r,
    }


def _stance(knee: float, ankle: float) -> Dict[str, tuple]:
    return {"left": ("stance", knee, ankle), "right": ("stance", knee, ankle)}


_STAND_LEGS = _stance(0.3, -0.2)  # = DEFAULT_POSE legs with pitch 0 (hip -0.1)


def _squat_keys() -> List[_Key]:
    stand = _Key(0.0, _STAND_LEGS)
    deep = _Key(
        1.1,
        _stance(2.0, -0.78),
        pitch=None,
        balance="both",
        upper={"waist_pitch": 0.15, **_arms(-1.2, 0.15, 0.5)},
    )
    return [
        stand,
        dataclasses.replace(stand, duration=0.3),
        deep,
        dataclasses.replace(deep, duration=0.4),
        dataclasses.replace(stand, duration=1.0),
        dataclasses.replace(stand, duration=0.2),
    ]


def _kick_keys() -> List[_Key]:
    # Stance on the left foot, front kick with the right leg.
    stand = _Key(0.0, _STAND_LEGS)
    shifted = _Key(
        0.5, _stance(0.4, -0.25), pitch=0.0, shift=None, ankle_shift=None, balance="left", upper=_arms(0.1, 0.35, 1.0)
    )

    def swing(duration, hip, knee, ankle, arms, lean=-0.1):
        # Fixed backward lean of the pelvis; the COM is kept over the stance foot by the
        # lateral shift and by moving the pelvis fore/aft with the stance ankle.
        return _Key(
            duration,
            {"left": ("stance", 0.4, -0.25), "right": ("free", hip, knee, ankle)},
            support="left",
            pitch=lean,
            shift=None,
            ankle_shift=None,
            balance="left",
            upper=arms,
        )

    guard = {"waist_pitch": 0.1, **_arms(-0.4, 0.45, 1.1, pitch_r=-0.1, roll_r=-0.45, elbow_r=1.0)}
    ready = _arms(-0.1, 0.4, 1.1)
    return [
        stand,
        dataclasses.replace(stand, duration=0.2),
        shifted,
        swing(0.35, -0.55, 1.1, -0.25, ready, lean=-0.05),  # lift the right foot
        swing(0.25, -1.1, 1.7, -0.2, guard, lean=-0.15),  # chamber
        swing(0.2, -1.35, 0.2, 0.35, guard, lean=-0.25),  # kick
        swing(0.1, -1.35, 0.2, 0.35, guard, lean=-0.25),  # hold the extension
        swing(0.3, -1.1, 1.6, -0.2, guard, lean=-0.15),  # retract
        swing(0.3, -0.45, 0.85, -0.35, ready, lean=-0.05),  # hover over the original spot
        dataclasses.replace(shifted, duration=0.25),  # put the foot down
        dataclasses.replace(stand, duration=0.55),
        dataclasses.replace(stand, duration=0.15),
    ]


def _jump_keys(synth: _Synth, rise: float = 0.2) -> List[_Key]:
    stand = _Key(0.0, _STAND_LEGS)
    crouch = _Key(
        0.5,
        _stance(1.4, -0.7),
        pitch=None,
        balance="both",
        upper={"waist_pitch": 0.2, **_arms(0.6, 0.25, 0.4)},
    )
    # Take-off: legs extended, heels up (toe push), arms swung forward and up.
    takeoff_legs = {"left": ("free", -0.3, 0.25, 0.4), "right": ("free", -0.3, 0.25, 0.4)}
    takeoff = _Key(
        0.0,
        takeoff_legs,
        pitch=0.05,
        flat=False,
        upper={"waist_pitch": 0.05, **_arms(-1.0, 0.3, 0.3)},
        easing=("ease_in", 3.0),
    )
    tuck = _Key(
        0.0,
        {"left": ("free", -0.9, 1.2, -0.1), "right": ("free", -0.9, 1.2, -0.1)},
        support="none",
        pitch=0.08,
        upper={"waist_pitch": 0.1, **_arms(-0.9, 0.35, 0.6)},
    )
    land = _Key(
        0.0,
        {"left": ("free", -0.35, 0.45, 0.2), "right": ("free", -0.35, 0.45, 0.2)},
        pitch=0.05,
        flat=False,
        contact="none",
        upper={"waist_pitch": 0.05, **_arms(-0.6, 0.3, 0.5)},
    )
    absorb = _Key(
        0.0,
        _stance(1.3, -0.65),
        pitch=None,
        balance="both",
        upper={"waist_pitch": 0.2, **_arms(-0.3, 0.3, 0.8)},
        easing=("ease_out", 3.0),
    )

    # Velocity matching: the push-off ends (ease-in, cubic) with the root rising at v0, the
    # flight is ballistic, and the landing absorption (ease-out) starts at the touch-down
    # speed. s'(1) = p / T for s = tau^p.
    v0 = math.sqrt(2.0 * GRAVITY * rise)
    both = _SUPPORT["both"]
    rate_push = synth.height_rate(crouch, takeoff, 1.0, both)
    t_push = float(np.clip(3.0 * rate_push / v0, 0.25, 0.45))
    t_flight = 2.0 * v0 / GRAVITY
    rate_land = abs(synth.height_rate(land, absorb, 0.0, both))
    t_absorb = float(np.clip(3.0 * rate_land / v0, 0.2, 0.5))
    return [
        stand,
        dataclasses.replace(stand, duration=0.2),
        crouch,
        dataclasses.replace(takeoff, duration=t_push),
        dataclasses.replace(tuck, duration=0.5 * t_flight),
        dataclasses.replace(land, duration=0.5 * t_flight),
        dataclasses.replace(absorb, duration=t_absorb),
        dataclasses.replace(stand, duration=0.55),
        dataclasses.replace(stand, duration=0.15),
    ]


def make_clip(name: str, fps: float = DEFAULT_FPS) -> MotionClip:
    """Synthesise the clip `name` ("jump", "squat" or "kick") at `fps`."""
    synth = _Synth(_kinematics())
    if name == "jump":
        keys = _jump_keys(synth)
    elif name == "squat":
        keys = _squat_keys()
    elif name == "kick":
        keys = _kick_keys()
    else:
        raise ValueError(f"unknown clip {name!r}; choose from {CLIP_NAMES}")
    return synth.synthesize(keys, fps, name)


def write_clips(out_dir: PathLike = C.MOTIONS_DIR, fps: float = DEFAULT_FPS) -> List[Path]:
    """Write ``g1_<name>.csv`` for every clip in ``CLIP_NAMES`` to `out_dir`; returns the paths."""
    return [save_csv(make_clip(n, fps), clip_path(n, out_dir)) for n in CLIP_NAMES]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI: ``python -m bcg_envs.envs.g1.clip_synthesis [out_dir]`` (default: the package's
    ``assets/motions``); prints a summary line per clip written."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out_dir = Path(argv[0]) if argv else C.MOTIONS_DIR
    for path in write_clips(out_dir):
        clip = load_csv(path)
        heights = foot_heights(clip)
        print(
            f"wrote {path} ({clip.num_frames} frames, {clip.duration:.2f} s); "
            f"root z {clip.root_pos[:, 2].min():.3f}..{clip.root_pos[:, 2].max():.3f} m, "
            f"lowest foot point {heights.min():+.4f} m"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
