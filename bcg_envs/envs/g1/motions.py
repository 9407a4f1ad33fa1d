"""Reference motion clips of the Unitree G1 (``assets/g1/g1.xml``), as loaded at runtime.

A :class:`MotionClip` holds a root trajectory and the 29 joint angles per frame, with the root
orientation as MuJoCo quaternions (w, x, y, z). It interpolates between frames (linear,
slerp for the root orientation), gives finite-difference velocities and MuJoCo ``qpos``.

Clip files follow the layout of the LAFAN1-retargeted G1 CSV files: one row per frame,
comma separated, no header, 36 columns =

    root x y z (m), root quaternion x y z w (scalar LAST), 29 joint angles (rad)

with the joints in :data:`constants.JOINT_NAMES` order. The scalar-last file order is
converted to (w, x, y, z) in :func:`load_csv` and back in :func:`save_csv` (and
:meth:`MotionClip.as_array`); nothing else sees it.

The shipped clips (``assets/motions/g1_<name>.csv``, ``name`` in
:data:`CLIP_NAMES`) were made offline by :mod:`bcg_envs.envs.g1.clip_synthesis`
(``python -m bcg_envs.envs.g1.clip_synthesis [out_dir]`` regenerates them).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import List, Optional, Tuple, Union

import numpy as np

from . import constants as C
from .quaternions import quat_conj, quat_mul, quat_slerp, quat_to_rotvec, wxyz_to_xyzw, xyzw_to_wxyz

#: A file path.
PathLike = Union[str, Path]
#: A time (s) or an array of times; lookups outside [0, duration] are clamped.
Times = Union[float, np.ndarray]

#: Values per CSV row: root position (3), root quaternion (4), joint angles (29).
NUM_COLUMNS = 3 + 4 + C.NUM_JOINTS  # 36
#: Frame rate (Hz) of the shipped clips and the default of the loaders.
DEFAULT_FPS = 30.0
#: Names of the shipped clips (``assets/motions/g1_<name>.csv``).
CLIP_NAMES: Tuple[str, ...] = ("jump", "squat", "kick")


# --------------------------------------------------------------------------------------
# MotionClip
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MotionFrame:
    """One (possibly interpolated) frame of a clip."""

    root_pos: np.ndarray  # (3,) m, world
    root_quat: np.ndarray  # (4,) w, x, y, z
    joint_pos: np.ndarray  # (29,) rad
    joint_vel: np.ndarray  # (29,) rad/s

    @property
    def qpos(self) -> np.ndarray:
        """MuJoCo qpos (36,): root pos, root quat (w x y z), joint angles."""
        return np.concatenate([self.root_pos, self.root_quat, self.joint_pos])


@dataclasses.dataclass
class MotionClip:
    """A G1 motion: `fps` (Hz), root_pos (T, 3) in m, root_quat (T, 4) as (w, x, y, z),
    joint_pos (T, 29) in rad; frame i is at time i / fps. Quaternions are normalized on
    construction."""

    fps: float
    root_pos: np.ndarray
    root_quat: np.ndarray
    joint_pos: np.ndarray
    name: str = ""

    def __post_init__(self) -> None:
        self.fps = float(self.fps)
        if not (math.isfinite(self.fps) and self.fps > 0):
            raise ValueError(f"fps must be positive, got {self.fps}")
        self.root_pos = np.array(self.root_pos, dtype=np.float64)
        self.root_quat = np.array(self.root_quat, dtype=np.float64)
        self.joint_pos = np.array(self.joint_pos, dtype=np.float64)
        n = self.root_pos.shape[0] if self.root_pos.ndim == 2 else -1
        if n < 1:
            raise ValueError(f"root_pos must have shape (T, 3), got {self.root_pos.shape}")
        expected = {"root_pos": (n, 3), "root_quat": (n, 4), "joint_pos": (n, C.NUM_JOINTS)}
        for field, shape in expected.items():
            arr = getattr(self, field)
            if arr.shape != shape:
                raise ValueError(f"{field} must have shape {shape}, got {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{field} contains non-finite values")
        norms = np.linalg.norm(self.root_quat, axis=-1)
        if np.any(norms < 1e-8):
            raise ValueError("root_quat contains a zero quaternion")
        self.root_quat = self.root_quat / norms[:, None]

    # ---- sizes --------------------------------------------------------------------
    @property
    def num_frames(self) -> int:
        """Number of frames T."""
        return int(self.root_pos.shape[0])

    def __len__(self) -> int:
        return self.num_frames

    @property
    def dt(self) -> float:
        """Time between frames (s)."""
        return 1.0 / self.fps

    @property
    def duration(self) -> float:
        """Time of the last frame (s); frame i is at time i / fps."""
        return (self.num_frames - 1) / self.fps

    @property
    def times(self) -> np.ndarray:
        """Frame times (T,) in s."""
        return np.arange(self.num_frames) / self.fps

    # ---- interpolation ------------------------------------------------------------
    def _index(self, t: Times) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Frame indices i0, i1 and blend weight for time(s) t, clamped to the clip."""
        x = np.clip(np.asarray(t, dtype=np.float64) * self.fps, 0.0, self.num_frames - 1)
        i0 = np.floor(x).astype(np.int64)
        i0 = np.minimum(i0, self.num_frames - 1)
        i1 = np.minimum(i0 + 1, self.num_frames - 1)
        return i0, i1, x - i0

    def root_pos_at(self, t: Times) -> np.ndarray:
        """Root position (..., 3) in m at time(s) t, linear between frames."""
        i0, i1, a = self._index(t)
        a = a[..., None]
        return (1.0 - a) * self.root_pos[i0] + a * self.root_pos[i1]

    def root_quat_at(self, t: Times) -> np.ndarray:
        """Root orientation (w, x, y, z) at time t, slerp between frames."""
        i0, i1, a = self._index(t)
        return quat_slerp(self.root_quat[i0], self.root_quat[i1], a)

    def joint_pos_at(self, t: Times) -> np.ndarray:
        """Joint angles (..., 29) in rad at time(s) t, linear between frames."""
        i0, i1, a = self._index(t)
        a = a[..., None]
        return (1.0 - a) * self.joint_pos[i0] + a * self.joint_pos[i1]

    def joint_vel_at(self, t: Times) -> np.ndarray:
        """Joint velocities (..., 29) in rad/s at time(s) t, from :meth:`joint_vel`."""
        i0, i1, a = self._index(t)
        v = self.joint_vel()
        a = a[..., None]
        return (1.0 - a) * v[i0] + a * v[i1]

    def frame(self, t: float) -> MotionFrame:
        """The clip at time t (s), interpolated; clamped to [0, duration]."""
        return MotionFrame(
            root_pos=self.root_pos_at(t),
            root_quat=self.root_quat_at(t),
            joint_pos=self.joint_pos_at(t),
            joint_vel=self.joint_vel_at(t),
        )

    def qpos_at(self, t: Times) -> np.ndarray:
        """MuJoCo qpos (..., 36) at time t: root pos, root quat (w x y z), joint angles."""
        return np.concatenate([self.root_pos_at(t), self.root_quat_at(t), self.joint_pos_at(t)], axis=-1)

    def qpos(self) -> np.ndarray:
        """MuJoCo qpos of every frame, (T, 36)."""
        return np.concatenate([self.root_pos, self.root_quat, self.joint_pos], axis=-1)

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
        q = self.root_quat
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
            root_quat=self.root_quat_at(t),
            joint_pos=self.joint_pos_at(t),
            name=self.name,
        )

    def as_array(self) -> np.ndarray:
        """(T, 36) array in the CSV column order (root quaternion x, y, z, w: scalar last)."""
        return np.concatenate([self.root_pos, wxyz_to_xyzw(self.root_quat), self.joint_pos], axis=1)


# --------------------------------------------------------------------------------------
# CSV I/O
# --------------------------------------------------------------------------------------


def load_csv(path: PathLike, fps: float = DEFAULT_FPS, name: Optional[str] = None) -> MotionClip:
    """Load a LAFAN1-retargeted G1 CSV (36 columns per row, no header; see the module
    docstring). The file's scalar-last root quaternion (x, y, z, w) becomes the clip's
    (w, x, y, z).

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
                    raise ValueError(f"{path}, line {lineno}, column {col}: non-finite value {field.strip()!r}")
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
        root_quat=xyzw_to_wxyz(data[:, 3:7]),  # file order x, y, z, w
        joint_pos=data[:, 7:],
        name=name if name is not None else path.stem,
    )


def save_csv(clip: MotionClip, path: PathLike) -> Path:
    """Write `clip` in the 36-column CSV layout (no header, root quaternion x, y, z, w, 9
    significant digits); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = clip.as_array() + 0.0  # + 0.0 turns -0.0 into 0.0
    lines = [",".join(f"{v:.9g}" for v in row) for row in data]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def clip_path(name: str, motions_dir: PathLike = C.MOTIONS_DIR) -> Path:
    """Path of the clip file ``g1_<name>.csv`` in `motions_dir` (default: the shipped clips)."""
    return Path(motions_dir) / f"g1_{name}.csv"


def load_clip(name: str, motions_dir: PathLike = C.MOTIONS_DIR, fps: float = DEFAULT_FPS) -> MotionClip:
    """Load a shipped clip (assets/motions/g1_<name>.csv)."""
    return load_csv(clip_path(name, motions_dir), fps=fps, name=name)
