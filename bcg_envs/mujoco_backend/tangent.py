"""Tangent-space state coordinates on MuJoCo C: ``bcg_envs.physics.tangent``'s maps for
host arrays, through MuJoCo's own ``mj_integratePos``/``mj_differentiatePos``."""

from __future__ import annotations

import mujoco
import numpy as np

from bcg_envs.physics.tangent import has_quaternions


class Tangent:
    """NumPy twin of ``bcg_envs.physics.tangent`` via ``mj_integratePos``/``mj_differentiatePos``."""

    def __init__(self, model: mujoco.MjModel):
        self.m = model
        self.quat = has_quaternions(model)
        self.nq, self.nv = int(model.nq), int(model.nv)

    def integrate(self, qpos: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """qpos (+) dq for a batch of displacements (k, nv) -> (k, nq)."""
        dq = np.atleast_2d(dq)
        if not self.quat:
            return qpos[None, :] + dq
        out = np.tile(qpos, (dq.shape[0], 1))
        for row, v in zip(out, dq):
            mujoco.mj_integratePos(self.m, row, v, 1.0)
        return out

    def difference(self, qpos: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """qpos (-) ref for a batch (k, nq) -> (k, nv)."""
        qpos = np.atleast_2d(qpos)
        if not self.quat:
            return qpos - ref[None, :]
        out = np.zeros((qpos.shape[0], self.nv))
        for row, q in zip(out, qpos):
            mujoco.mj_differentiatePos(self.m, row, 1.0, ref, q)
        return out
