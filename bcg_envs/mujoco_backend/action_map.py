"""The action maps of the MuJoCo C backend: the policy's clipped action to the physics
action (``PhysicsAction``) and the physics action to ``ctrl`` (``ActionMap``), on NumPy
arrays."""

from __future__ import annotations

from typing import Any, Dict, Optional

import jax
import numpy as np

from bcg_envs.mujoco_backend.task_spec import TaskSpec


class PhysicsAction:
    """``MjxEnv.physics_action`` on host data: the policy's clipped action and the step's
    info (before the step) to the action ``action_to_ctrl`` maps, and its Jacobian for
    ``grad_step``'s chain rule. The identity, without a JAX call, for tasks that keep the
    base's hook (``TaskSpec.physics_action`` None)."""

    def __init__(self, spec: TaskSpec):
        self.identity = spec.physics_action is None
        if not self.identity:
            self._f = jax.jit(spec.physics_action)
            self._jac = jax.jit(jax.jacfwd(spec.physics_action))

    @staticmethod
    def _info(info: Dict[str, Any]) -> Dict[str, np.ndarray]:
        return {k: np.asarray(v) for k, v in info.items()}

    def __call__(self, clipped: np.ndarray, info: Dict[str, Any]) -> np.ndarray:
        if self.identity:
            return clipped
        return np.asarray(self._f(clipped, self._info(info)), np.float32)

    def jacobian(self, clipped: np.ndarray, info: Dict[str, Any]) -> np.ndarray:
        """d physics action / d action, (nu, nu)."""
        if self.identity:
            return np.eye(clipped.shape[-1])
        return np.asarray(self._jac(clipped, self._info(info)), np.float64)


class ActionMap:
    """``action_to_ctrl`` in NumPy: ``c + M a`` when the task's map is affine (checked at
    random points), otherwise the jitted JAX function."""

    def __init__(self, action_to_ctrl, nu: int):
        f = jax.jit(action_to_ctrl)
        zero = np.zeros(nu, np.float32)
        c = np.asarray(f(zero), np.float64)
        M = np.asarray(jax.jacfwd(action_to_ctrl)(zero), np.float64).reshape(c.size, nu)
        rng = np.random.default_rng(0)
        affine = True
        for _ in range(4):
            a = rng.uniform(-1, 1, nu).astype(np.float32)
            ref = np.asarray(f(a), np.float64)
            if not np.allclose(ref, c + M @ a, rtol=1e-5, atol=1e-6 * (1 + np.abs(ref).max())):
                affine = False
        self.c, self.M, self.affine, self._f = c, M, affine, f
        #: Per control, ``(c_j, k, M[j, k])`` where each row of ``M`` has one nonzero
        #: entry ``k`` and no ``c_j`` is -0.0 (else None): then ``c_j + a_k M[j, k]`` in
        #: Python floats is ``__call__``'s value bit for bit (the other products are
        #: exact zeros, and adding a zero of either sign to ``c_j`` gives ``c_j``'s sign).
        self.terms: Optional[list] = None
        if affine and all(np.count_nonzero(row) == 1 for row in M) and not np.any((c == 0) & np.signbit(c)):
            cols = [int(np.flatnonzero(row)[0]) for row in M]
            self.terms = [(float(cj), k, float(row[k])) for cj, k, row in zip(c, cols, M)]

    def __call__(self, action: np.ndarray) -> np.ndarray:
        if self.affine:
            return self.c + np.asarray(action, np.float64) @ self.M.T
        if np.ndim(action) == 2:
            return np.asarray(jax.vmap(self._f)(np.asarray(action, np.float32)), np.float64)
        return np.asarray(self._f(np.asarray(action, np.float32)), np.float64)
