"""A penalty contact model after the BCG paper's description, beside MuJoCo's soft
constraints (the authors' own code is ``moreau_contact``).

MuJoCo solves contact as soft constraints in a convex, implicit solve: with
implicit-function derivatives the step Jacobians stay bounded however stiff the contact.
The BCG paper's simulator instead scales contact impulses by a sigmoid of penetration
depth with sharpness ``kappa`` (300 /m for training, 50 and 100 as softer ablations), a
penalty whose derivative grows with ``kappa``: the setting in which exact gradients
through contact explode and bundling pays.

Per physics substep (timestep ``h``), for every contact MuJoCo's collision detection
reports (distance ``dist``, point, frame with normal ``n`` from geom 1 to geom 2):

* penetration ``p = -dist`` (m) and activation ``w = sigmoid(kappa * p)``;
* ``v`` = relative velocity of geom 2's contact point w.r.t. geom 1's, in the contact
  frame, after the substep's smooth and non-contact constraint forces (``qvel + h qacc``,
  with the integrator's own velocity update: implicit in the actuators' and joints'
  damping for ``implicitfast``);
* normal impulses (N s): for one contact ``lambda_n = w * t / a_n``, the target velocity
  change ``t = relu(-v_n) + beta * relu(p) / h`` (stop the approach, push out a fraction
  ``beta`` of the penetration: a Baumgarte term of ours, not in the authors' code, and on
  BoxPush what makes this model's exact gradients explode) over the inverse effective
  mass ``a_n = n' J M^-1 J' n``:
  the rigid impulse scaled by the sigmoid. Contacts acting together (a box's corners, a
  foot's spheres) are coupled through the Delassus matrix ``A`` of the normals:
  ``lambda_n = relu(W^1/2 y)`` with ``(W^1/2 A W^1/2 + diag((1 - w + eps) a_n)) y = W^1/2 t``,
  which is the coupled rigid impulse where every ``w = 1``, leaves a contact out where
  its ``w = 0``, and is the single-contact formula for one contact;
* regularized Coulomb friction against the tangential slip ``v_t``, with ``N = max(1,
  sum of w over the contacts between the same two bodies)`` sharing the stopping impulse:
  ``lambda_t = -min(mu lambda_n, s / (a_t N)) v_t / s``, ``s = sqrt(|v_t|^2 + eps^2)``
  (``eps`` = ``slip_velocity``: below it friction is viscous with gain ``mu lambda_n /
  eps``; at 1 mm/s this ramp, not kappa, is what makes exact gradients explode on
  PlanarHand's grasp, where 0.1 m/s brings them to the authors' model's level);
* the impulses enter as generalized force ``J' lambda / h`` (``qfrc_constraint`` and
  ``qacc``), and the normal force ``lambda_n / h`` (N) is reported in the contact's first
  ``efc_force`` row, where the bundle trigger and the tasks read contact forces.

MuJoCo's own contact constraints are switched off by ``disable_constraint_contacts``:
MJX keeps colliding the geoms (``dist`` is reported for every candidate pair) but a
contact's constraint row only activates when ``dist`` is below the pair's margin, which
is set far below any penetration. Joint limits, joint friction loss and equality
constraints stay MuJoCo constraints.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.physics import mjx_private

#: Contact margin (m) that keeps a contact's constraint row inactive in MJX (a row is
#: active where ``dist`` < the pair's margin; MJX does not read ``geom_gap``).
INACTIVE_MARGIN = -1e3
#: Relative diagonal regularization of the coupled normal solve (contacts that cannot
#: all be satisfied, e.g. a flat box's four corners with three free directions, share).
REGULARIZATION = 1e-3


@dataclasses.dataclass(frozen=True)
class PenaltyContact:
    """Parameters of the penalty contact model.

    Attributes:
      kappa: sigmoid sharpness (1/m); the activation rises from 12 % to 88 % over a
        penetration band of 4 / kappa (1.3 cm at 300). Larger is stiffer.
      baumgarte: fraction of the penetration pushed out per substep, in [0, 1]; 0 only
        stops the approach (no push-out term, as the BCG authors' impulses).
      slip_velocity: friction regularization ``eps`` (m/s): below it Coulomb friction
        scales down with the slip speed (a viscous ramp; narrower is stiffer).
    """

    kappa: float = 300.0
    baumgarte: float = 0.2
    slip_velocity: float = 1e-3

    def __post_init__(self) -> None:
        for name in ("kappa", "baumgarte", "slip_velocity"):
            value = getattr(self, name)
            if isinstance(value, jax.core.Tracer):
                continue  # a traced stiffness (``Physics.with_contact_stiffness``), checked by its caller
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
            if name == "baumgarte" and not 0 <= value <= 1:
                raise ValueError(f"baumgarte must be in [0, 1], got {value!r}")
            if name != "baumgarte" and value <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def disable_constraint_contacts(mj_model: mujoco.MjModel) -> None:
    """Keep MJX's collision detection but never activate a contact constraint row (in
    place; MuJoCo C then reports no contacts for this model)."""
    mj_model.geom_margin[:] = INACTIVE_MARGIN / 2  # a pair's margin is the sum of its geoms'
    if mj_model.npair:
        mj_model.pair_margin[:] = INACTIVE_MARGIN


def impulses(
    params: PenaltyContact, m: mjx.Model, d: mjx.Data, qacc: jax.Array, solve: Callable[[jax.Array], jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """``(generalized impulse (nv,), normal impulse per contact (ncon,))`` of one substep.

    ``d`` holds the substep's kinematics and contacts; ``qacc`` is the acceleration the
    integrator would apply without contact forces and ``solve(x)`` its velocity response
    to a generalized impulse ``x`` (``M^-1 x``, or ``(M - h dF/dv)^-1 x`` for implicit
    integration), so that the impulses are sized for the velocity update actually taken.
    """
    contact = mjx_private.contact(d)
    h = m.opt.timestep
    body = jnp.asarray(m.geom_bodyid)[contact.geom]  # (ncon, 2)

    def frame_jacobian(point, bodies, frame):
        j1, _ = mjx.jac(m, d, point, bodies[0])
        j2, _ = mjx.jac(m, d, point, bodies[1])
        return frame.reshape(3, 3) @ (j2 - j1).T  # (3, nv): rows normal, tangent 1, tangent 2

    J = jax.vmap(frame_jacobian)(contact.pos, body, contact.frame)  # (ncon, 3, nv)
    ncon, nv = J.shape[0], J.shape[2]
    Minv_Jt = jax.vmap(solve)(J.reshape(-1, nv)).reshape(ncon, 3, nv)
    v = J @ (d.qvel + h * qacc)  # (ncon, 3)
    A = jnp.einsum("iv,jv->ij", J[:, 0], Minv_Jt[:, 0])  # normal Delassus matrix
    a_n = jnp.maximum(jnp.diagonal(A), 1e-9)
    a_t = jnp.maximum(
        0.5 * (jnp.einsum("cv,cv->c", J[:, 1], Minv_Jt[:, 1]) + jnp.einsum("cv,cv->c", J[:, 2], Minv_Jt[:, 2])), 1e-9
    )

    p = -contact.dist
    w = jax.nn.sigmoid(params.kappa * p)
    sqrt_w = jnp.exp(0.5 * jax.nn.log_sigmoid(params.kappa * p))  # finite derivative at w -> 0
    target = jax.nn.relu(-v[:, 0]) + params.baumgarte * jax.nn.relu(p) / h
    gated = sqrt_w[:, None] * A * sqrt_w[None, :] + jnp.diag((1.0 - w + REGULARIZATION) * a_n)
    lam_n = jax.nn.relu(sqrt_w * jnp.linalg.solve(gated, sqrt_w * target))
    same_pair = jnp.all(body[:, None, :] == body[None, :, :], axis=-1)
    share = jnp.maximum(1.0, same_pair.astype(w.dtype) @ w)

    mu = jnp.where(jnp.asarray(contact.dim) > 1, contact.friction[:, 0], 0.0)
    slip = v[:, 1:]
    s = jnp.sqrt(jnp.sum(slip**2, axis=-1) + params.slip_velocity**2)
    lam_t = -jnp.minimum(mu * lam_n, s / (a_t * share))[:, None] * slip / s[:, None]

    lam = jnp.concatenate([lam_n[:, None], lam_t], axis=1)  # (ncon, 3)
    return jnp.einsum("cjv,cj->v", J, lam), lam_n
