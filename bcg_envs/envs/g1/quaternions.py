"""Quaternion helpers of the G1 tasks, in MuJoCo's component order (w, x, y, z).

Every quaternion here is ``(..., 4)`` with the scalar first, as in MuJoCo's ``qpos`` of a free
joint, ``mju_quat2Mat`` and MJX; ``q`` and ``-q`` are the same rotation. Angles are in
radians, rotation vectors are axis * angle (rad), and ``R(q)`` maps body-frame vectors to
the world frame. All functions broadcast over leading axes.

Each function is written once for both array libraries: given any JAX array (including a
tracer under ``jit``/``grad``) it computes with ``jax.numpy`` in the input dtype (the
runtime reward and observation code); otherwise it computes with NumPy in float64 (clip
loading, reference preprocessing and the offline clip synthesis, which need float64 on the
host while JAX runs in float32).

The only other order in the G1 code is the scalar-last (x, y, z, w) of the motion CSV files;
:func:`xyzw_to_wxyz` and :func:`wxyz_to_xyzw` convert at that file boundary
(:mod:`bcg_envs.envs.g1.motions`) and nowhere else.
"""

from __future__ import annotations

from typing import Union

import jax
import jax.numpy as jnp
import numpy as np

#: A NumPy or JAX array (or anything ``np.asarray`` accepts, for the NumPy path).
Array = Union[np.ndarray, jax.Array]
ArrayLike = Union[Array, float, list, tuple]

#: Squared-norm floor of :func:`quat_normalize` (keeps the zero quaternion finite and its
#: gradient defined; far below the squared norm of any quaternion in use).
_NORM_SQ_FLOOR = 1e-12


def _xp(*arrays: ArrayLike):
    """``jax.numpy`` if any argument is a JAX array, else NumPy."""
    return jnp if any(isinstance(a, jax.Array) for a in arrays) else np


def _asarray(xp, x: ArrayLike) -> Array:
    return jnp.asarray(x) if xp is jnp else np.asarray(x, dtype=np.float64)


def quat_normalize(q: ArrayLike) -> Array:
    """``q / |q|`` (w, x, y, z); the squared norm is floored at 1e-12 (finite at zero)."""
    xp = _xp(q)
    q = _asarray(xp, q)
    norm_sq = xp.sum(q * q, axis=-1, keepdims=True)
    return q / xp.sqrt(xp.maximum(norm_sq, _NORM_SQ_FLOOR))


def quat_conj(q: ArrayLike) -> Array:
    """Conjugate (w, -x, -y, -z): the inverse rotation of a unit quaternion."""
    xp = _xp(q)
    q = _asarray(xp, q)
    return q * xp.asarray([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def quat_mul(a: ArrayLike, b: ArrayLike) -> Array:
    """Hamilton product ``a * b`` (w, x, y, z): the rotation b followed by a, R(ab) = R(a) R(b)."""
    xp = _xp(a, b)
    a, b = _asarray(xp, a), _asarray(xp, b)
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return xp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_rotate(q: ArrayLike, v: ArrayLike) -> Array:
    """``R(q) v`` for a unit quaternion q (w, x, y, z) and vectors v (..., 3)."""
    xp = _xp(q, v)
    q, v = _asarray(xp, q), _asarray(xp, v)
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * xp.cross(u, v)
    return v + w * t + xp.cross(u, t)


def quat_rotate_inverse(q: ArrayLike, v: ArrayLike) -> Array:
    """``R(q)^T v``: a world vector expressed in the frame of the unit quaternion q."""
    return quat_rotate(quat_conj(q), v)


def quat_to_6d(q: ArrayLike) -> Array:
    """First two columns of R(q), (..., 6): a continuous encoding of the rotation."""
    xp = _xp(q)
    q = _asarray(xp, q)
    ex = quat_rotate(q, xp.asarray([1.0, 0.0, 0.0], dtype=q.dtype))
    ey = quat_rotate(q, xp.asarray([0.0, 1.0, 0.0], dtype=q.dtype))
    return xp.concatenate([ex, ey], axis=-1)


def quat_error(q: ArrayLike, q_ref: ArrayLike) -> Array:
    """``1 - <q, q_ref>^2 = sin^2(theta / 2)``, theta (rad) the angle between the rotations.

    Smooth everywhere (no square root or absolute value) and 0 for q = +-q_ref; the inputs
    need not be normalized.
    """
    xp = _xp(q, q_ref)
    dot = xp.sum(quat_normalize(q) * quat_normalize(q_ref), axis=-1)
    return 1.0 - dot**2


def quat_to_rotvec(q: ArrayLike) -> Array:
    """Rotation vector (axis * angle, rad, angle in [0, pi]) of q (w, x, y, z): the log map."""
    xp = _xp(q)
    q = quat_normalize(q)
    q = xp.where(q[..., :1] < 0.0, -q, q)  # shortest rotation
    v = q[..., 1:]
    # Floored so the square root keeps a finite gradient at the identity; below the floor
    # the small-angle limit (scale 2) is used and s does not matter.
    s = xp.sqrt(xp.maximum(xp.sum(v * v, axis=-1, keepdims=True), 1e-24))
    angle = 2.0 * xp.arctan2(s, q[..., :1])
    scale = xp.where(s > 1e-12, angle / xp.maximum(s, 1e-12), 2.0)
    return v * scale


def quat_slerp(q0: ArrayLike, q1: ArrayLike, alpha: ArrayLike) -> Array:
    """Spherical linear interpolation from q0 (alpha 0) to q1 (alpha 1), shortest path.

    ``alpha`` broadcasts against the leading axes of q0 and q1; the result is a unit
    quaternion (w, x, y, z).
    """
    xp = _xp(q0, q1, alpha)
    q0 = quat_normalize(q0)
    q1 = quat_normalize(q1)
    a = _asarray(xp, alpha)[..., None]
    dot = xp.sum(q0 * q1, axis=-1, keepdims=True)
    q1 = xp.where(dot < 0.0, -q1, q1)
    dot = xp.abs(dot)
    theta = xp.arccos(xp.clip(dot, -1.0, 1.0))
    sin_theta = xp.sin(theta)
    near = sin_theta < 1e-6
    safe = xp.where(near, 1.0, sin_theta)
    w0 = xp.where(near, 1.0 - a, xp.sin((1.0 - a) * theta) / safe)
    w1 = xp.where(near, a, xp.sin(a * theta) / safe)
    return quat_normalize(w0 * q0 + w1 * q1)


def quat_from_pitch(pitch: ArrayLike) -> Array:
    """Unit quaternion (w, x, y, z) of a rotation by ``pitch`` (rad) about the world y axis."""
    xp = _xp(pitch)
    p = _asarray(xp, pitch)
    zero = xp.zeros_like(p)
    return xp.stack([xp.cos(p / 2), zero, xp.sin(p / 2), zero], axis=-1)


def xyzw_to_wxyz(q: ArrayLike) -> Array:
    """Reorder scalar-last (x, y, z, w) quaternions, as stored in the motion CSV files, to
    MuJoCo's (w, x, y, z). For file boundaries only."""
    xp = _xp(q)
    q = _asarray(xp, q)
    return xp.concatenate([q[..., 3:], q[..., :3]], axis=-1)


def wxyz_to_xyzw(q: ArrayLike) -> Array:
    """Reorder (w, x, y, z) quaternions to the scalar-last (x, y, z, w) of the motion CSV
    files; the inverse of :func:`xyzw_to_wxyz`. For file boundaries only."""
    xp = _xp(q)
    q = _asarray(xp, q)
    return xp.concatenate([q[..., 1:], q[..., :1]], axis=-1)


__all__ = [
    "Array",
    "ArrayLike",
    "quat_conj",
    "quat_error",
    "quat_from_pitch",
    "quat_mul",
    "quat_normalize",
    "quat_rotate",
    "quat_rotate_inverse",
    "quat_slerp",
    "quat_to_6d",
    "quat_to_rotvec",
    "wxyz_to_xyzw",
    "xyzw_to_wxyz",
]
