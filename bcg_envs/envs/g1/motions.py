"""Reference motion clips for the Unitree G1 (``bcg_envs/assets/g1/g1.xml``).

A :class:`MotionClip` holds a root trajectory and the 29 joint angles per frame, in the
layout of the LAFAN1-retargeted G1 CSV files: one row per frame, comma separated, no
header, 36 columns =

    root x y z (m), root quaternion x y z w (scalar last), 29 joint angles (rad)

with the joints in :data:`constants.JOINT_NAMES` order.

``make_clip(name)`` synthesises the clips shipped in ``bcg_envs/assets/motions`` ("jump", "squat",
"kick") from a handful of keyframes:

* keyframes are interpolated with minimum-jerk easing (zero velocity and acceleration at
  each keyframe, never overshooting), or with an ease-in / ease-out profile on the jump's
  push-off and landing;
* support feet are kept flat by solving the two ankle angles analytically from forward
  kinematics, and for balanced keyframes the root pitch (and, on one foot, a lateral hip
  roll shift) is solved so that the whole-body COM lies over the support;
* the root position of every frame comes from forward kinematics of ``g1.xml``: while
  feet are on the ground the lowest sphere of the support feet sits at z=0 and the support
  feet do not slide; during the jump's flight the root follows a ballistic parabola.

Run ``python -m bcg_envs.envs.g1.motions [out_dir]`` to regenerate the CSV files.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import constants as C

PathLike = Union[str, Path]

NUM_COLUMNS = 3 + 4 + C.NUM_JOINTS  # 36
DEFAULT_FPS = 30.0
GRAVITY = 9.81
CLIP_NAMES: Tuple[str, ...] = ("jump", "squat", "kick")


# --------------------------------------------------------------------------------------
# Quaternion helpers (scalar-last x, y, z, w like the CSV; vectorised over leading axes).
# --------------------------------------------------------------------------------------


def quat_normalize(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a*b of xyzw quaternions."""
    ax, ay, az, aw = np.moveaxis(np.asarray(a, dtype=np.float64), -1, 0)
    bx, by, bz, bw = np.moveaxis(np.asarray(b, dtype=np.float64), -1, 0)
    return np.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        axis=-1,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return np.concatenate([-q[..., :3], q[..., 3:]], axis=-1)


def quat_to_rotvec(q: np.ndarray) -> np.ndarray:
    """Rotation vector (axis * angle) of xyzw quaternions, shortest rotation."""
    q = quat_normalize(q)
    q = np.where(q[..., 3:] < 0.0, -q, q)
    v = q[..., :3]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., 3:])
    scale = np.where(s > 1e-12, angle / np.maximum(s, 1e-12), 2.0)
    return v * scale


def quat_slerp(q0: np.ndarray, q1: np.ndarray, alpha) -> np.ndarray:
    """Spherical linear interpolation between xyzw quaternions (shortest path)."""
    q0 = quat_normalize(q0)
    q1 = quat_normalize(q1)
    a = np.asarray(alpha, dtype=np.float64)[..., None]
    dot = np.sum(q0 * q1, axis=-1, keepdims=True)
    q1 = np.where(dot < 0.0, -q1, q1)
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    sin_theta = np.sin(theta)
    near = sin_theta < 1e-6
    safe = np.where(near, 1.0, sin_theta)
    w0 = np.where(near, 1.0 - a, np.sin((1.0 - a) * theta) / safe)
    w1 = np.where(near, a, np.sin(a * theta) / safe)
    return quat_normalize(w0 * q0 + w1 * q1)


def quat_from_pitch(pitch) -> np.ndarray:
    """xyzw quaternion of a rotation by `pitch` about the world y axis."""
    p = np.asarray(pitch, dtype=np.float64)
    return np.stack(
        [np.zeros_like(p), np.sin(p / 2), np.zeros_like(p), np.cos(p / 2)], axis=-1
    )


def xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return np.concatenate([q[..., 3:], q[..., :3]], axis=-1)


def wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return np.concatenate([q[..., 1:], q[..., :1]], axis=-1)


# --------------------------------------------------------------------------------------
# MotionClip
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MotionFrame:
    """One (possibly interpolated) frame of a clip."""

    root_pos: np.ndarray  # (3,)
    root_quat_xyzw: np.ndarray  # (4,)
    joint_pos: np.ndarray  # (29,)
    joint_vel: np.ndarray  # (29,)

    @property
    def qpos(self) -> np.ndarray:
        """MuJoCo qpos (36,): root pos, root quat (w x y z), joint angles."""
        return np.concatenate([self.root_pos, xyzw_to_wxyz(self.root_quat_xyzw), self.joint_pos])


@dataclasses.dataclass
class MotionClip:
    """A G1 motion: `fps`, root_pos (T,3), root_quat_xyzw (T,4), joint_pos (T,29)."""

    fps: float
    root_pos: np.ndarray
    root_quat_xyzw: np.ndarray
    joint_pos: np.ndarray
    name: str = ""

    def __post_init__(self) -> None:
        self.fps = float(self.fps)
        if not (math.isfinite(self.fps) and self.fps > 0):
            raise ValueError(f"fps must be positive, got {self.fps}")
        self.root_pos = np.array(self.root_pos, dtype=np.float64)
        self.root_quat_xyzw = np.array(self.root_quat_xyzw, dtype=np.float64)
        self.joint_pos = np.array(self.joint_pos, dtype=np.float64)
        n = self.root_pos.shape[0] if self.root_pos.ndim == 2 else -1
        if n < 1:
            raise ValueError(f"root_pos must have shape (T, 3), got {self.root_pos.shape}")
        expected = {"root_pos": (n, 3), "root_quat_xyzw": (n, 4), "joint_pos": (n, C.NUM_JOINTS)}
        for field, shape in expected.items():
            arr = getattr(self, field)
            if arr.shape != shape:
                raise ValueError(f"{field} must have shape {shape}, got {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{field} contains non-finite values")
        norms = np.linalg.norm(self.root_quat_xyzw, axis=-1)
        if np.any(norms < 1e-8):
            raise ValueError("root_quat_xyzw contains a zero quaternion")
        self.root_quat_xyzw = self.root_quat_xyzw / norms[:, None]

    # ---- sizes --------------------------------------------------------------------
    @property
    def num_frames(self) -> int:
        return int(self.root_pos.shape[0])

    def __len__(self) -> int:
        return self.num_frames

    @property
    def dt(self) -> float:
        return 1.0 / self.fps

    @property
    def duration(self) -> float:
        """Time of the last frame (s); frame i is at time i / fps."""
        return (self.num_frames - 1) / self.fps

    @property
    def times(self) -> np.ndarray:
        return np.arange(self.num_frames) / self.fps

    # ---- interpolation ------------------------------------------------------------
    def _index(self, t) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Frame indices i0, i1 and blend weight for time(s) t, clamped to the clip."""
        x = np.clip(np.asarray(t, dtype=np.float64) * self.fps, 0.0, self.num_frames - 1)
        i0 = np.floor(x).astype(np.int64)
        i0 = np.minimum(i0, self.num_frames - 1)
        i1 = np.minimum(i0 + 1, self.num_frames - 1)
        return i0, i1, x - i0

    def root_pos_at(self, t) -> np.ndarray:
        i0, i1, a = self._index(t)
        a = a[..., None]
        return (1.0 - a) * self.root_pos[i0] + a * self.root_pos[i1]

    def root_quat_at(self, t) -> np.ndarray:
        """Root orientation (xyzw) at time t, slerp between frames."""
        i0, i1, a = self._index(t)
        return quat_slerp(self.root_quat_xyzw[i0], self.root_quat_xyzw[i1], a)

    def joint_pos_at(self, t) -> np.ndarray:
        i0, i1, a = self._index(t)
        a = a[..., None]
        return (1.0 - a) * self.joint_pos[i0] + a * self.joint_pos[i1]

    def joint_vel_at(self, t) -> np.ndarray:
        i0, i1, a = self._index(t)
        v = self.joint_vel()
        a = a[..., None]
        return (1.0 - a) * v[i0] + a * v[i1]

    def frame(self, t: float) -> MotionFrame:
        return MotionFrame(
            root_pos=self.root_pos_at(t),
            root_quat_xyzw=self.root_quat_at(t),
            joint_pos=self.joint_pos_at(t),
            joint_vel=self.joint_vel_at(t),
        )

    def qpos_at(self, t) -> np.ndarray:
        """MuJoCo qpos (..., 36) at time t (root quaternion converted to w x y z)."""
        return np.concatenate(
            [self.root_pos_at(t), xyzw_to_wxyz(self.root_quat_at(t)), self.joint_pos_at(t)],
            axis=-1,
        )

    def qpos(self) -> np.ndarray:
        """MuJoCo qpos of every frame, (T, 36)."""
        return np.concatenate(
            [self.root_pos, xyzw_to_wxyz(self.root_quat_xyzw), self.joint_pos], axis=-1
        )

    # ---- finite differences ---------------------------------------------------------
    def _gradient(self, x: np.ndarray) -> np.ndarray:
        if self.num_frames < 2:
            return np.zeros_like(x)
        return np.gradient(x, self.dt, axis=0)

    def joint_vel(self) -> np.ndarray:
        """Joint velocities (T, 29) in rad/s: central differences, one-sided at the ends."""
        return self._gradient(self.joint_pos)

    def root_lin_vel(self) -> np.ndarray:
        """Root linear velocity (T, 3) in the world frame (m/s)."""
        return self._gradient(self.root_pos)

    def root_ang_vel(self) -> np.ndarray:
        """Root angular velocity (T, 3) in the world frame (rad/s)."""
        q = self.root_quat_xyzw
        n = self.num_frames
        if n < 2:
            return np.zeros((n, 3))
        out = np.empty((n, 3))
        # Central differences inside, one-sided at the ends; world frame: dq = q1 * q0^-1.
        out[1:-1] = quat_to_rotvec(quat_mul(q[2:], quat_conj(q[:-2]))) / (2.0 * self.dt)
        out[0] = quat_to_rotvec(quat_mul(q[1], quat_conj(q[0]))) / self.dt
        out[-1] = quat_to_rotvec(quat_mul(q[-1], quat_conj(q[-2]))) / self.dt
        return out

    # ---- misc -----------------------------------------------------------------------
    def resample(self, fps: float) -> "MotionClip":
        """The same motion sampled at `fps` (frames at k / fps up to the clip duration)."""
        n = int(math.floor(self.duration * fps + 1e-9)) + 1
        t = np.arange(n) / fps
        return MotionClip(
            fps=fps,
            root_pos=self.root_pos_at(t),
            root_quat_xyzw=self.root_quat_at(t),
            joint_pos=self.joint_pos_at(t),
            name=self.name,
        )

    def as_array(self) -> np.ndarray:
        """(T, 36) array in CSV column order."""
        return np.concatenate([self.root_pos, self.root_quat_xyzw, self.joint_pos], axis=1)


# --------------------------------------------------------------------------------------
# CSV I/O
# --------------------------------------------------------------------------------------


def load_csv(path: PathLike, fps: float = DEFAULT_FPS, name: Optional[str] = None) -> MotionClip:
    """Load a LAFAN1-retargeted G1 CSV (36 columns per row, no header).

    Raises ValueError naming the file and the 1-based line on a wrong column count, a value
    that is not a number, a non-finite value or a zero quaternion. Blank lines are skipped.
    """
    path = Path(path)
    rows: List[List[float]] = []
    with open(path, "r", encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            text = line.strip()
            if not text:
                continue
            fields = text.split(",")
            if len(fields) != NUM_COLUMNS:
                raise ValueError(
                    f"{path}, line {lineno}: expected {NUM_COLUMNS} comma-separated values "
                    f"(root xyz, root quat xyzw, {C.NUM_JOINTS} joint angles), got {len(fields)}"
                )
            values = []
            for col, field in enumerate(fields, start=1):
                try:
                    v = float(field)
                except ValueError:
                    raise ValueError(
                        f"{path}, line {lineno}, column {col}: {field.strip()!r} is not a number"
                    ) from None
                if not math.isfinite(v):
                    raise ValueError(
                        f"{path}, line {lineno}, column {col}: non-finite value {field.strip()!r}"
                    )
                values.append(v)
            if math.sqrt(sum(v * v for v in values[3:7])) < 1e-8:
                raise ValueError(f"{path}, line {lineno}: root quaternion is zero")
            rows.append(values)
    if not rows:
        raise ValueError(f"{path}: no data rows")
    data = np.asarray(rows, dtype=np.float64)
    return MotionClip(
        fps=fps,
        root_pos=data[:, 0:3],
        root_quat_xyzw=data[:, 3:7],
        joint_pos=data[:, 7:],
        name=name if name is not None else path.stem,
    )


def save_csv(clip: MotionClip, path: PathLike) -> Path:
    """Write `clip` in the 36-column CSV layout (no header); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = clip.as_array() + 0.0  # + 0.0 turns -0.0 into 0.0
    lines = [",".join(f"{v:.9g}" for v in row) for row in data]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


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

    def set(self, root_pos, root_quat_xyzw, joint_pos) -> None:
        """Set the pose and run kinematics + COM computation."""
        d = self.data
        d.qpos[:3] = root_pos
        d.qpos[3:7] = xyzw_to_wxyz(root_quat_xyzw)
        d.qpos[self.qadr] = joint_pos
        self._mj.mj_kinematics(self.model, d)
        self._mj.mj_comPos(self.model, d)

    def sphere_bottoms(self, side: str) -> np.ndarray:
        """z of the lowest point of each foot sphere of `side` (current pose)."""
        ids = self.sphere_ids[side]
        return self.data.geom_xpos[ids, 2] - self.sphere_radius[side]

    def foot_site_pos(self, side: str) -> np.ndarray:
        return self.data.site_xpos[self.foot_site[side]].copy()

    def com(self) -> np.ndarray:
        return self.data.subtree_com[1].copy()

    def foot_z_axis(self, side: str) -> np.ndarray:
        return self.data.xmat[self.foot_body[side]].reshape(3, 3)[:, 2].copy()

    def flat_ankles(self, root_quat_xyzw, joint_pos, sides: Sequence[str]) -> np.ndarray:
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
            self.set(np.zeros(3), root_quat_xyzw, q)
            worst = 0.0
            if it:
                for s in sides:
                    r_foot = self.data.xmat[self.foot_body[s]].reshape(3, 3)
                    yaw = math.atan2(r_foot[1, 0], r_foot[0, 0])
                    q[_LEG_OFFSET[s] + 2] -= yaw
                    worst = max(worst, abs(yaw))
                if worst < 1e-7:
                    break
                self.set(np.zeros(3), root_quat_xyzw, q)
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
            self.set(clip.root_pos[i], clip.root_quat_xyzw[i], clip.joint_pos[i])
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
        return MotionClip(fps=fps, root_pos=root_pos, root_quat_xyzw=quat, joint_pos=joints, name=name)

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
        "left_shoulder_pitch": pitch_l, "left_shoulder_roll": roll_l, "left_elbow": elbow_l,
        "right_shoulder_pitch": pitch_r, "right_shoulder_roll": roll_r, "right_elbow": elbow_r,
    }


def _stance(knee: float, ankle: float) -> Dict[str, tuple]:
    return {"left": ("stance", knee, ankle), "right": ("stance", knee, ankle)}


_STAND_LEGS = _stance(0.3, -0.2)  # = DEFAULT_POSE legs with pitch 0 (hip -0.1)


def _squat_keys() -> List[_Key]:
    stand = _Key(0.0, _STAND_LEGS)
    deep = _Key(
        1.1, _stance(2.0, -0.78), pitch=None, balance="both",
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
    shifted = _Key(0.5, _stance(0.4, -0.25), pitch=0.0, shift=None, ankle_shift=None,
                   balance="left", upper=_arms(0.1, 0.35, 1.0))

    def swing(duration, hip, knee, ankle, arms, lean=-0.1):
        # Fixed backward lean of the pelvis; the COM is kept over the stance foot by the
        # lateral shift and by moving the pelvis fore/aft with the stance ankle.
        return _Key(
            duration,
            {"left": ("stance", 0.4, -0.25), "right": ("free", hip, knee, ankle)},
            support="left", pitch=lean, shift=None, ankle_shift=None, balance="left", upper=arms,
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
        0.5, _stance(1.4, -0.7), pitch=None, balance="both",
        upper={"waist_pitch": 0.2, **_arms(0.6, 0.25, 0.4)},
    )
    # Take-off: legs extended, heels up (toe push), arms swung forward and up.
    takeoff_legs = {"left": ("free", -0.3, 0.25, 0.4), "right": ("free", -0.3, 0.25, 0.4)}
    takeoff = _Key(0.0, takeoff_legs, pitch=0.05, flat=False,
                   upper={"waist_pitch": 0.05, **_arms(-1.0, 0.3, 0.3)}, easing=("ease_in", 3.0))
    tuck = _Key(0.0, {"left": ("free", -0.9, 1.2, -0.1), "right": ("free", -0.9, 1.2, -0.1)},
                support="none", pitch=0.08, upper={"waist_pitch": 0.1, **_arms(-0.9, 0.35, 0.6)})
    land = _Key(0.0, {"left": ("free", -0.35, 0.45, 0.2), "right": ("free", -0.35, 0.45, 0.2)},
                pitch=0.05, flat=False, contact="none",
                upper={"waist_pitch": 0.05, **_arms(-0.6, 0.3, 0.5)})
    absorb = _Key(0.0, _stance(1.3, -0.65), pitch=None, balance="both",
                  upper={"waist_pitch": 0.2, **_arms(-0.3, 0.3, 0.8)}, easing=("ease_out", 3.0))

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


def clip_path(name: str, motions_dir: PathLike = C.MOTIONS_DIR) -> Path:
    return Path(motions_dir) / f"g1_{name}.csv"


def load_clip(name: str, motions_dir: PathLike = C.MOTIONS_DIR, fps: float = DEFAULT_FPS) -> MotionClip:
    """Load a shipped clip (bcg_envs/assets/motions/g1_<name>.csv)."""
    return load_csv(clip_path(name, motions_dir), fps=fps, name=name)


def write_clips(out_dir: PathLike = C.MOTIONS_DIR, fps: float = DEFAULT_FPS) -> List[Path]:
    """Regenerate g1_<name>.csv for every clip in CLIP_NAMES."""
    return [save_csv(make_clip(n, fps), clip_path(n, out_dir)) for n in CLIP_NAMES]


def main(argv: Optional[Sequence[str]] = None) -> int:
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
