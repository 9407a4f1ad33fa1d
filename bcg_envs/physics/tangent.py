"""Tangent-space state coordinates, as in MuJoCo's ``mjd_transitionFD``.

The differentiable state is ``x = (dq, qvel, act)`` with ``dq`` (length ``nv``) a
displacement in the tangent space of ``qpos``: free joints contribute a 3-vector of
translation and a 3-vector rotation (world frame for the translation, local frame for
the rotation, as ``mj_integratePos``), ball joints a local 3-vector rotation, and hinge
and slide joints their scalar. ``integrate_pos`` and ``difference_pos`` are the
JAX counterparts of ``mj_integratePos`` and ``mj_differentiatePos``.
"""

from __future__ import annotations

import jax.numpy as jnp
import mujoco
import numpy as np

from bcg_envs.physics import mjx_private


def _joint_layout(model: mujoco.MjModel) -> list[tuple[int, int, int]]:
    """(type, qpos address, dof address) of every joint, as static Python ints."""
    return [(int(model.jnt_type[j]), int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])) for j in range(model.njnt)]


def has_quaternions(model: mujoco.MjModel) -> bool:
    return bool(np.any(np.isin(model.jnt_type, [mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL])))


def _quat_exp(rotvec: jnp.ndarray) -> jnp.ndarray:
    """Unit quaternion of a rotation vector, smooth (and differentiable) at zero."""
    angle2 = jnp.sum(rotvec**2)
    small = angle2 < 1e-12
    safe2 = jnp.where(small, 1.0, angle2)
    angle = jnp.sqrt(safe2)
    half = 0.5 * angle
    scale = jnp.where(small, 0.5 - angle2 / 48.0, jnp.sin(half) / angle)
    w = jnp.where(small, 1.0 - angle2 / 8.0, jnp.cos(half))
    return jnp.concatenate([w[None], scale * rotvec])


def _quat_log(quat: jnp.ndarray) -> jnp.ndarray:
    """Rotation vector of a unit quaternion (shortest arc), smooth at identity."""
    quat = jnp.where(quat[0] < 0, -quat, quat)
    v = quat[1:]
    sin2 = jnp.sum(v**2)
    small = sin2 < 1e-12
    sin_half = jnp.sqrt(jnp.where(small, 1.0, sin2))
    angle = 2.0 * jnp.arctan2(sin_half, quat[0])
    scale = jnp.where(small, 2.0 / jnp.maximum(quat[0], 1e-6), angle / sin_half)
    return scale * v


def integrate_pos(model: mujoco.MjModel, qpos: jnp.ndarray, dq: jnp.ndarray) -> jnp.ndarray:
    """qpos (+) dq: move ``qpos`` by the tangent displacement ``dq``."""
    if not has_quaternions(model):
        return qpos + dq
    out = qpos
    for jtype, qadr, dadr in _joint_layout(model):
        if jtype == mujoco.mjtJoint.mjJNT_FREE:
            out = out.at[qadr : qadr + 3].add(dq[dadr : dadr + 3])
            quat = mjx_private.quat_mul(qpos[qadr + 3 : qadr + 7], _quat_exp(dq[dadr + 3 : dadr + 6]))
            out = out.at[qadr + 3 : qadr + 7].set(quat)
        elif jtype == mujoco.mjtJoint.mjJNT_BALL:
            quat = mjx_private.quat_mul(qpos[qadr : qadr + 4], _quat_exp(dq[dadr : dadr + 3]))
            out = out.at[qadr : qadr + 4].set(quat)
        else:
            out = out.at[qadr].add(dq[dadr])
    return out


def difference_pos(model: mujoco.MjModel, qpos: jnp.ndarray, qpos_ref: jnp.ndarray) -> jnp.ndarray:
    """qpos (-) qpos_ref: the tangent displacement ``dq`` with ``qpos_ref (+) dq = qpos``."""
    if not has_quaternions(model):
        return qpos - qpos_ref
    dq = jnp.zeros(model.nv, dtype=qpos.dtype)
    for jtype, qadr, dadr in _joint_layout(model):
        if jtype == mujoco.mjtJoint.mjJNT_FREE:
            dq = dq.at[dadr : dadr + 3].set(qpos[qadr : qadr + 3] - qpos_ref[qadr : qadr + 3])
            rel = mjx_private.quat_mul(mjx_private.quat_inv(qpos_ref[qadr + 3 : qadr + 7]), qpos[qadr + 3 : qadr + 7])
            dq = dq.at[dadr + 3 : dadr + 6].set(_quat_log(rel))
        elif jtype == mujoco.mjtJoint.mjJNT_BALL:
            rel = mjx_private.quat_mul(mjx_private.quat_inv(qpos_ref[qadr : qadr + 4]), qpos[qadr : qadr + 4])
            dq = dq.at[dadr : dadr + 3].set(_quat_log(rel))
        else:
            dq = dq.at[dadr].set(qpos[qadr] - qpos_ref[qadr])
    return dq
