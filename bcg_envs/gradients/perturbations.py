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

Both backends sample the contact-local offsets from the one description here:
``contact_chain`` (which dofs, the damped Gram matrix) and ``chain_offsets`` (standard
normal draws to ``(dq, dqvel)``), written against an array module ``xp`` (``numpy`` for the
C backend, ``jax.numpy`` for MJX). Only the random draws differ: a JAX key split three ways
here, the step's ``numpy.random.Generator`` in ``bcg_envs.mujoco_backend.jacobians``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.gradients.config import BundleConfig


def global_sigma(nv: int, na: int, nu: int, config: BundleConfig, zeroth: bool) -> np.ndarray:
    """Per-input std of the global bundle: (dq, dqvel, dact, du), float64 NumPy (both
    backends use it; JAX code takes it as a float32 constant).

    The zeroth-order fit needs every input perturbed, so for it zero stds of the
    actuator states and actions fall back to ``state_sigma[0]``.
    """
    pos, vel = config.state_sigma
    if zeroth and not (pos > 0 and vel > 0):
        raise ValueError(
            f"BundleConfig.state_sigma must be > 0 in both entries for the zeroth-order fit (zeroth, alpha): "
            f"an input never perturbed gets a zero Jacobian column; got {config.state_sigma}"
        )
    act = pos if zeroth else 0.0
    u = config.action_sigma if (config.action_sigma > 0 or not zeroth) else pos
    return np.concatenate([np.full(nv, pos), np.full(nv, vel), np.full(na, act), np.full(nu, u)])


def global_sampler(sigma: jnp.ndarray, nx: int) -> Callable[[jax.Array], Tuple[jnp.ndarray, jnp.ndarray]]:
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
        j1, _ = mjx.jac(model, data, point, bodies[0])
        j2, _ = mjx.jac(model, data, point, bodies[1])
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


class ContactChain(NamedTuple):
    """The contact-local perturbation of one step, as arrays of one backend."""

    #: (3 * ncon, nv) stacked relative contact Jacobian (m per unit dof), columns of the
    #: dofs a perturbation may not move zeroed.
    jacobian: Any
    #: (3 * ncon, 3 * ncon) ``J J^T + damping I`` of the damped pseudo-inverse.
    gram: Any
    #: (nv,) 1 on the dofs ``J`` moves (the chain), 0 elsewhere.
    chain: Any


def contact_chain(
    jacobian: Any, damping: float, perturbable: Optional[Any] = None, xp: Any = np, dtype: Optional[Any] = None
) -> ContactChain:
    """The chain and Gram matrix of a stacked contact Jacobian, in array module ``xp``.

    ``perturbable`` (bool, nv) masks the dofs a perturbation may move: the other columns
    of ``jacobian`` are zeroed before the pseudo-inverse, so a foot's contact perturbs its
    leg, not the floating base. ``dtype`` is the chain mask's (default ``jacobian``'s).
    """
    if perturbable is not None:
        jacobian = jacobian * xp.asarray(perturbable, jacobian.dtype)[None, :]
    gram = jacobian @ jacobian.T + damping * xp.eye(jacobian.shape[0])
    chain = xp.any(xp.abs(jacobian) > 0, axis=0).astype(jacobian.dtype if dtype is None else dtype)
    return ContactChain(jacobian, gram, chain)


def draw_size(space: str, chain: ContactChain) -> int:
    """Standard normals ``chain_offsets`` takes per offset block: one per contact row
    (``cartesian``) or per dof (``joint``)."""
    return int(chain.jacobian.shape[0] if space == "cartesian" else chain.jacobian.shape[1])


def chain_offsets(
    chain: ContactChain,
    space: str,
    state_sigma: Tuple[float, float],
    z_pos: Any,
    z_vel: Any,
    row_scale: Optional[Any] = None,
    xp: Any = np,
) -> Tuple[Any, Any]:
    """``(dq, dqvel)`` (nv each) of one contact-local offset from standard normals ``z_pos``,
    ``z_vel`` (``draw_size`` each).

    ``cartesian``: contact-point displacements ``state_sigma[0] z_pos`` (m) and velocities
    ``state_sigma[1] z_vel`` (m/s), times ``row_scale`` per row when given (0 drops a row),
    mapped by the damped pseudo-inverse ``J^T (J J^T + damping I)^-1``. ``joint``: the
    chain's dofs directly, ``state_sigma`` in rad (or m) and rad/s (or m/s).
    """
    pos_sigma, vel_sigma = state_sigma
    jacobian = chain.jacobian
    if space != "cartesian":
        return pos_sigma * chain.chain * z_pos, vel_sigma * chain.chain * z_vel
    if jacobian.shape[0] == 0:
        zero = xp.zeros(jacobian.shape[1], jacobian.dtype)
        return zero, zero
    pos_scale = pos_sigma if row_scale is None else pos_sigma * row_scale
    vel_scale = vel_sigma if row_scale is None else vel_sigma * row_scale
    dq = jacobian.T @ xp.linalg.solve(chain.gram, pos_scale * z_pos)
    dqvel = jacobian.T @ xp.linalg.solve(chain.gram, vel_scale * z_vel)
    return dq, dqvel


def sampled_contacts(pressing: Any, force: Any, xp: Any = jnp) -> Any:
    """Mask of the contacts whose chains the contact-local sampler perturbs, one rule for
    both backends: those whose event fires the ``bcg`` trigger (``pressing``), or, at a
    step where none does (a step later in a triggered window, or an estimator that bundles
    every contact step), every contact with a positive normal force (``force``, N)."""
    pressing = xp.asarray(pressing, dtype=bool)
    return xp.where(xp.any(pressing), pressing, xp.asarray(force) > 0)


def contact_sampler(
    jacobian: jnp.ndarray,
    active: jnp.ndarray,
    nx: int,
    nv: int,
    nu: int,
    config: BundleConfig,
    perturbable: Optional[jnp.ndarray] = None,
) -> Callable[[jax.Array], Tuple[jnp.ndarray, jnp.ndarray]]:
    """Sampler of contact-local offsets for ``bcg`` (``contact_chain`` and
    ``chain_offsets`` in ``jax.numpy``, masks in float32; rows of inactive contacts are
    dropped). ``perturbable`` as in ``contact_chain``."""
    chain = contact_chain(jacobian, config.damping, perturbable, xp=jnp, dtype=jnp.float32)
    row_on = jnp.repeat(active, 3).astype(jnp.float32)
    size = draw_size(config.space, chain)

    def sample(key: jax.Array) -> Tuple[jnp.ndarray, jnp.ndarray]:
        kp, kv, ku = jax.random.split(key, 3)
        z_pos, z_vel = jax.random.normal(kp, (size,)), jax.random.normal(kv, (size,))
        dq, dqvel = chain_offsets(chain, config.space, config.state_sigma, z_pos, z_vel, row_on, xp=jnp)
        dx = jnp.zeros(nx).at[:nv].set(dq).at[nv : 2 * nv].set(dqvel)
        du = config.action_sigma * jax.random.normal(ku, (nu,))
        return dx, du

    return sample
