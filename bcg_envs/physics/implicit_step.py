"""One MJX physics step whose derivative is the implicit-function derivative of the solver.

``mjx.step`` runs the constraint solver in a ``lax.while_loop`` that stops when the cost
gradient falls below ``opt.tolerance``. Differentiated in forward mode, the loop returns
the tangent of whatever the iterations did; when the solver's start point (the warm start
or ``qacc_smooth``) is already optimal it takes no iteration at all, and the tangent is
that of the start point. That happens whenever nothing changes between substeps: an
object at rest held by dry friction (``frictionloss``), a resting contact. The Jacobian
then ignores the constraints (d(velocity)/d(velocity) of a box held by friction comes out
as 1 instead of ~0), and products of such Jacobians over a rollout can overflow.

This step fixes that at the root:

* the solver runs on ``stop_gradient`` inputs (no tangents through the loop at all, which
  also makes forward-mode Jacobians cheaper to compile and run);
* one Newton step from the solver's answer ``x0`` supplies the tangent:
  ``qacc = x0 + (delta - stop_gradient(delta))`` with ``delta = -H(x0)^-1 g(x0)``, the
  gradient ``g`` and Hessian ``H`` of MuJoCo's constrained cost (Gauss + constraint terms
  at ``x0``'s active set). The primal ``qacc`` is exactly MJX's; its derivative is
  ``-H^-1 dg/dtheta``, the implicit-function derivative of the optimum (``g(x*) = 0``), the
  same quantity finite differences of a converged MuJoCo C solve measure. The constraint
  force gets the matching derivative from the optimality identity
  ``qfrc_constraint = M qacc - qfrc_smooth``.

The Newton step comes from MJX's solver context (private API of the pinned
``mujoco-mjx``, through ``mjx_private``; requires ``opt.solver = Newton``).

``implicitfast`` follows MuJoCo C: an actuator whose force sits at its ``forcerange`` bound
has no velocity derivative (its force no longer depends on velocity), so its ``kv`` is left
out of the implicit update. MJX 3.17 keeps it there, which scales a saturated servo's velocity
change by ``I / (I + h kv)``; ``clamp_aware`` removes the difference.
"""

from __future__ import annotations

from typing import Optional

import jax
import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.physics import mjx_private, penalty_contact

_INTEGRATORS = {
    int(mujoco.mjtIntegrator.mjINT_EULER): mjx.euler,
    int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST): lambda m, d: mjx.implicit(clamp_aware(m, d), d),
}


def check_model(mj_model: mujoco.MjModel) -> None:
    """The models this step supports: Newton solver, Euler or implicitfast integrator."""
    if mj_model.opt.solver != mujoco.mjtSolver.mjSOL_NEWTON:
        raise ValueError("bcg_envs needs opt.solver = Newton (its Jacobians use the Newton Hessian)")
    if int(mj_model.opt.integrator) not in _INTEGRATORS:
        raise ValueError("bcg_envs supports the Euler and implicitfast integrators")


def forward(m: mjx.Model, d: mjx.Data) -> mjx.Data:
    """``mjx.forward`` with the solver's tangent replaced by the implicit-function one."""
    d = mjx.fwd_position(m, d)
    d = mjx.sensor_pos(m, d)
    d = mjx.fwd_velocity(m, d)
    d = mjx.sensor_vel(m, d)
    d = mjx.fwd_actuation(m, d)
    d = mjx.fwd_acceleration(m, d)
    if not mjx_private.has_constraint_rows(d):
        return d.replace(qacc=d.qacc_smooth)
    solved = mjx.solve(m, jax.lax.stop_gradient(d))
    x0 = solved.qacc
    qacc = x0 + _tangent_only(-mjx_private.newton_direction(m, d.replace(qacc=x0)))
    # At the optimum qfrc_constraint = M qacc - qfrc_smooth: the solver's value, with the
    # derivative of that identity (implicitfast integrates qfrc_smooth + qfrc_constraint).
    qfrc = solved.qfrc_constraint + _tangent_only(mjx.mul_m(m, d, qacc) - d.qfrc_smooth)
    d = d.replace(qacc=qacc, qfrc_constraint=qfrc)
    d = mjx_private.with_efc_force(d, mjx_private.efc_force(solved))
    return mjx.sensor_acc(m, d)


def _tangent_only(x: jax.Array) -> jax.Array:
    """Zero in value, ``x``'s derivative in tangent."""
    return x - jax.lax.stop_gradient(x)


def clamp_aware(m: mjx.Model, d: mjx.Data) -> mjx.Model:
    """``m`` with the velocity gains (``gainprm[2]``, ``biasprm[2]``) of every force-limited
    actuator whose ``d.actuator_force`` is at a ``forcerange`` bound set to zero: the model
    MJX's ``implicitfast`` must see to take the same step as MuJoCo C (which skips such
    actuators in ``qDeriv``). Used only for the implicit update; the forces are ``d``'s."""
    limited = np.asarray(m.actuator_forcelimited, bool)
    if not limited.any():
        return m
    force = d.actuator_force
    lower, upper = m.actuator_forcerange[:, 0], m.actuator_forcerange[:, 1]
    clamped = limited & ((force <= lower) | (force >= upper))
    free = jax.numpy.where(clamped, 0.0, 1.0).astype(m.actuator_gainprm.dtype)
    return m.replace(
        actuator_gainprm=m.actuator_gainprm.at[..., 2].multiply(free),
        actuator_biasprm=m.actuator_biasprm.at[..., 2].multiply(free),
    )


def integration_mass(m: mjx.Model, d: mjx.Data) -> jax.Array:
    """The dense matrix the integrator inverts for ``qacc``: ``M - h dF/dv`` (implicitfast,
    force-clamped actuators excluded as in MuJoCo C), ``M + h diag(damping)`` (Euler with
    implicit damping), else ``M``."""
    qm = mjx.full_m(m, d)
    h = m.opt.timestep
    if int(m.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST):
        qderiv = mjx.deriv_smooth_vel(clamp_aware(m, d), d)
        return qm if qderiv is None else qm - h * qderiv
    if not m.opt.disableflags & mjx.DisableBit.EULERDAMP:
        return qm + h * jax.numpy.diag(jax.numpy.asarray(m.dof_damping))
    return qm


def add_penalty_contacts(
    params: penalty_contact.PenaltyContact, m: mjx.Model, d: mjx.Data, normal_rows: np.ndarray
) -> mjx.Data:
    """Add the penalty model's contact impulses to a solved substep (``forward``'s output):
    ``qacc`` and ``qfrc_constraint`` gain ``J' lambda / h``; each contact's normal force
    (N) goes to its ``efc_force`` row ``normal_rows[c]`` (-1: none)."""
    h = m.opt.timestep
    factor = jax.scipy.linalg.cho_factor(integration_mass(m, d))
    solve = lambda x: jax.scipy.linalg.cho_solve(factor, x)
    qacc = solve(d.qfrc_smooth + d.qfrc_constraint)
    qimp, lam_n = penalty_contact.impulses(params, m, d, qacc, solve)
    d = d.replace(qacc=qacc + solve(qimp) / h, qfrc_constraint=d.qfrc_constraint + qimp / h)
    rows = np.asarray(normal_rows)
    if rows.size and np.any(rows >= 0):
        keep = np.flatnonzero(rows >= 0)
        force = mjx_private.efc_force(d).at[rows[keep]].set(lam_n[keep] / h)
        d = mjx_private.with_efc_force(d, force)
    return d


def step(
    m: mjx.Model,
    d: mjx.Data,
    penalty: Optional[penalty_contact.PenaltyContact] = None,
    normal_rows: Optional[np.ndarray] = None,
) -> mjx.Data:
    """``mjx.step`` (same primal) with implicit-function derivatives of the solver; with
    ``penalty``, contact forces come from the penalty model instead (its model must have
    gone through ``penalty_contact.disable_constraint_contacts``)."""
    d = forward(m, d)
    if penalty is not None:
        d = add_penalty_contacts(penalty, m, d, normal_rows if normal_rows is not None else np.zeros(0, int))
    return _INTEGRATORS[int(m.opt.integrator)](m, d)
