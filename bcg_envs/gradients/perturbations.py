"""Perturbation samplers: global Gaussian and contact-local (BCG).

A sampler maps a PRNG key to one ``(dx, du)`` offset in tangent coordinates
(``dx = (dq, dqvel, dact)``). The contact-local sampler perturbs only the kinematic
chains of contacts whose normal force exceeds the threshold:

* ``space="cartesian"`` (the paper): draw a contact-point displacement ``dp`` and
  velocity ``dv`` per pressing contact and map them to joint space through the damped
  pseudo-inverse of the stacked relative contact Jacobian ``J``:
  ``dq = J^T (J J^T + lambda I)^-1 dp``;
* ``space="joint"``: perturb the chain's dofs (those ``J`` moves) directly.

A floating base (free joint) is left out of the chain unless ``BundleConfig.perturb_base``:
on a humanoid every contact Jacobian moves the base, so perturbing it would move the whole
robot, not the contacting limb.
"""

from __future__ import annotations

from typing import Optional, Tuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx
from mujoco.mjx._src import support

from bcg_envs.gradients.config import BundleConfig


def global_sigma(nv: int, na: int, nu: int, config: BundleConfig, zeroth: bool) -> np.ndarray:
    """Per-input std of the global bundle: (dq, dqvel, dact, du), float64 NumPy (both
    backends use it; JAX code takes it as a float32 constant).

    The zeroth-order fit needs every input perturbed, so for it zero stds of the
    actuator states and actions fall back to ``state_sigma[0]``.
    """
    pos, vel = config.state_sigma
    act = pos if zeroth else 0.0
    u = config.action_sigma if (config.action_sigma > 0 or not zeroth) else pos
    return np.concatenate([np.full(nv, pos), np.full(nv, vel), np.full(na, act), np.full(nu, u)])


def global_sampler(sigma: jnp.ndarray, nx: int):
    def sample(key: jax.Array) -> Tuple[jnp.ndarray, jnp.ndarray]:
        w = sigma * jax.random.normal(key, sigma.shape)
        return w[:nx], w[nx:]

    return sample


def contact_jacobian(
    model: mjx.Model, body_ids: jnp.ndarray, data: mjx.Data, points: jnp.ndarray, active: jnp.ndarray
) -> jnp.ndarray:
    """Stacked relative translational Jacobians (3 * ncon x nv) of the active contacts.

    ``body_ids`` (ncon x 2) are the bodies of each contact's two geoms; row block ``c`` maps
    joint velocities to the velocity of body 1's contact point relative to body 2's.
    """

    def one(point, bodies, on):
        j1, _ = support.jac(model, data, point, bodies[0])
        j2, _ = support.jac(model, data, point, bodies[1])
        return jnp.where(on, (j1 - j2).T, 0.0)

    if points.shape[0] == 0:
        return jnp.zeros((0, model.nv))
    return jax.vmap(one)(points, body_ids, active).reshape(-1, model.nv)


def floating_base_dofs(model: mujoco.MjModel) -> np.ndarray:
    """Bool mask (nv,) of the dofs of free joints (a floating base: the whole robot)."""
    mask = np.zeros(model.nv, bool)
    for j in np.flatnonzero(model.jnt_type == mujoco.mjtJoint.mjJNT_FREE):
        adr = int(model.jnt_dofadr[j])
        mask[adr : adr + 6] = True
    return mask


def contact_sampler(
    jacobian: jnp.ndarray,
    active: jnp.ndarray,
    nx: int,
    nv: int,
    nu: int,
    config: BundleConfig,
    perturbable: Optional[jnp.ndarray] = None,
):
    """Sampler of contact-local offsets for ``bcg`` (see module docstring).

    ``perturbable`` (bool, nv) masks the dofs a perturbation may move: the contact
    Jacobian's other columns are zeroed before the pseudo-inverse, so a foot's contact
    perturbs its leg, not the floating base that carries the whole robot.
    """
    pos_sigma, vel_sigma = config.state_sigma
    if perturbable is not None:
        jacobian = jacobian * jnp.asarray(perturbable, jacobian.dtype)[None, :]
    row_on = jnp.repeat(active, 3).astype(jnp.float32)
    gram = jacobian @ jacobian.T + config.damping * jnp.eye(jacobian.shape[0])
    chain = jnp.any(jnp.abs(jacobian) > 0, axis=0).astype(jnp.float32)

    def sample(key: jax.Array) -> Tuple[jnp.ndarray, jnp.ndarray]:
        kp, kv, ku = jax.random.split(key, 3)
        if config.space == "cartesian":
            dp = pos_sigma * row_on * jax.random.normal(kp, row_on.shape)
            dv = vel_sigma * row_on * jax.random.normal(kv, row_on.shape)
            dq = jacobian.T @ jnp.linalg.solve(gram, dp)
            dqvel = jacobian.T @ jnp.linalg.solve(gram, dv)
        else:
            dq = pos_sigma * chain * jax.random.normal(kp, (nv,))
            dqvel = vel_sigma * chain * jax.random.normal(kv, (nv,))
        dx = jnp.zeros(nx).at[:nv].set(dq).at[nv : 2 * nv].set(dqvel)
        du = config.action_sigma * jax.random.normal(ku, (nu,))
        return dx, du

    return sample
