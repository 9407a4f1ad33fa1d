"""The BCG authors' own contact model: Moreau midpoint stepping with a smoothed prox solve.

Source: the authors' public simulator, GitHub ``ClemensSchwarke/warp``, file
``warp/sim/integrator_moreau.py`` (branches ``main`` and ``dev/jbagajo/main``, read at
686b4621 and 80a3beea; ``MoreauIntegrator.simulate`` with ``mode="soft"``, the kernels
``integrate_q_halfstep``, ``construct_contact_jacobian``, ``prox_iteration_unrolled_soft``
/ ``prox_loop_soft``, ``p_to_f_s`` and ``jcalc_integrate``). What this module does per
physics substep (timestep ``h``), as read from that code:

* **midpoint**: ``q_mid = q (+) qd h/2``; kinematics, mass matrix ``M``, every
  non-contact generalized force ``tau`` (bias, passive, actuators: the PD servos at
  ``q_mid`` with the step's starting velocity) and the contact geometry are evaluated
  at ``(q_mid, qd)``;
* **contact rows** only for contacts whose signed gap ``c`` (m; MuJoCo's ``dist``,
  negative while penetrating) is ``<= contact_margin`` (their ``col_height``, 0.0 in
  their model builder: a contact exists only while penetrating). Each row block is the
  relative velocity of the contact point in the contact frame (normal, two tangents),
  ``Jc`` (3 x nv), taken at MuJoCo's contact point (the midpoint between the surfaces;
  theirs is the sphere's lowest point, a difference of half the penetration);
* **Delassus** ``G = Jc M^-1 Jc^T`` (3 x 3 blocks ``G_ij``) and free contact velocity
  ``c_i = Jc_i (qd + h M^-1 tau)``;
* **impulses** from ``prox_iterations`` sweeps of projected block Gauss-Seidel (contacts
  updated in order, each using the others' newest values), started unprojected at
  ``p_i = -G_ii^-1 c_i``:
  ``p_i <- Proj_mu_i[p_i - r_i (G_ii p_i + sum_{j != i} s_j G_ij p_j + c_i)]`` with the
  step ``r_i = 1 / (1 + sum_j det G_ij)`` (determinants of the 3 x 3 blocks, the diagonal
  one included: their "+1 for stability"; see ``step_cap``) and the **hard** Coulomb cone: a non-positive
  normal impulse zeroes the whole impulse, a tangential impulse longer than ``mu p_n`` is
  scaled back to it;
* **smoothing**: the impulse applied is ``s_i p_i`` with ``s_i = sigmoid(kappa *
  penetration_i)``, penetration ``= -c_i`` (m, kappa in 1/m): the same ``s_j`` weights
  the coupling terms inside the iterations (the diagonal term is not weighted);
* **velocity and position**: ``qd+ = qd + h M^-1 tau + M^-1 Jc^T (s p)`` (explicit: their
  PD torques and damping are part of ``tau``; see ``implicit_damping``), then
  ``q+ = q (+) (qd + qd+) h/2`` (``jcalc_integrate``: the average of the two velocities
  over the whole step from ``q``, the same as ``q_mid (+) qd+ h/2`` for hinges and
  slides);
* their code applies ``-p / h`` into the body *bias*-force accumulator, which enters the
  generalized force with a minus sign: the force on the robot is ``+ s p / h`` along the
  contact normal, i.e. ``p_n > 0`` pushes the bodies apart. The normal force
  ``s_i p_n,i / h`` (N) is reported in the contact's first ``efc_force`` row, where the
  bundle trigger and the tasks read contact forces (``Physics.contact_normal_forces``);
* derivatives: plain autodiff through the unrolled iterations (their training
  differentiates the same smoothed kernels with Warp's tape), no custom rule.

Two properties of the model worth knowing:

* it is discontinuous where a contact row appears: at ``c = contact_margin`` the impulse
  jumps from 0 to ``sigmoid(-kappa contact_margin)`` times the solved one (half of it at
  the default margin 0); the sigmoid smooths the force only inside the margin;
* it has no position correction: each substep a fraction ``1 - s`` of the impulse that
  would stop a contact is missing, so a resting contact keeps sinking at a speed that
  falls off like ``exp(-kappa d)`` with the depth ``d`` (a single contact at rest sinks
  to ``d ~ ln(1 + kappa g h t) / kappa``: 9 mm after 1 s at kappa 300, h = 5 ms). G1
  standing at kappa 300 has its 5 mm foot spheres 13 mm deep after 1 s (12 mm with 50
  prox sweeps), and its open-loop stand pose tips over after about 1.7 s. At kappa 1000
  the feet still sink about 2 mm/s (measured with ``implicit_damping=False``), where
  ``s`` is ~1: 10 sweeps leave the coupled foot contacts unconverged.

Where their code is specific to their robots or silent, this module chooses (each is a
parameter or documented here):

* ``contact_margin`` (their ``col_height``): default 0.0 as in their builder; the value
  used in training is not in that repository.
* contacts are MuJoCo's collision pairs (any geoms, normal from MuJoCo's contact frame)
  instead of their hard-coded four ground contacts per articulation with normal ``+y``;
  every contact of the model is one block in one Gauss-Seidel sweep, in MJX's contact
  order; ``mu`` is each contact's MuJoCo friction coefficient (theirs: one global value,
  or the first shape's per environment on ``dev/jbagajo/main``). A frictionless contact
  (``condim`` 1) and a tangent row that no joint can move (a planar model's out-of-plane
  tangent) get no row: the tangential impulse there would be projected to zero (mu = 0)
  or is meaningless, and dropping the row keeps ``G_ii`` invertible. Torsional and rolling
  friction (``condim`` 4, 6) are ignored.
* the starting point uses ``G_ii^-1``; like Warp's 3 x 3 inverse (zero matrix for a zero
  determinant) it is zero for a contact without rows.
* ``implicit_damping`` (default True) makes the velocity update implicit in the damping
  terms, as the tasks' ``implicitfast`` integrator: their explicit update is unstable for
  G1's ankles at 5 ms in flight (``MoreauContact.implicit_damping``); False is theirs.
* ``step_cap`` (default True) bounds their step ``r_i`` by ``1 / ||G_ii||_inf``: their
  step is tuned to kilogram-scale robots and diverges on light or planar contacts
  (``MoreauContact.step_cap``); False reproduces their kernels.
* non-contact constraints of the model (joint limits, joint friction loss, equality
  constraints) stay MuJoCo's soft constraints, solved at the midpoint by the implicit
  step (``implicit_step.forward``) and counted in ``tau``; their code has spring-damper
  joint limits inside ``tau`` and no friction loss. Actuators are the task's MuJoCo
  actuators (their PD law, torque clamps and, on ``dev/jbagajo/main``, viscous joint
  friction and velocity-dependent torque limits are their robots' actuator model, not
  part of the contact model).
* rotations: the half step and the final step use MuJoCo's quaternion integration (the
  exponential map, local angular velocity) where their free joint takes a normalized
  first-order quaternion step in the world frame; the two agree to first order in
  ``h |omega|``.
* actuator activations (``na > 0``) advance by MuJoCo's rule at the midpoint.
* the sigmoid is ``jax.nn.sigmoid``; theirs clamps the exponent to [-100, 50], which only
  matters beyond 0.33 m of penetration at kappa 300.
* the midpoint can be switched off (``midpoint=False``: dynamics at ``q``, then
  ``q+ = q (+) qd+ h``, MuJoCo's semi-implicit Euler) for the decomposition experiments.
* the hard friction cone can be replaced by a smooth saturation (``friction="regularized"``,
  ``regularize_friction``), also for the decomposition experiments: their cone's radial
  scaling has a kink where the tangential impulse reaches ``mu p_n``.

MuJoCo's own contact constraints are switched off as for the penalty model
(``penalty_contact.disable_constraint_contacts``): MJX still reports every candidate
pair's distance, but no contact constraint row ever activates.

The private MJX pieces the model needs (contact slots, constraint-row forces, the
activation update) come through ``mjx_private``.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.physics import implicit_step, mjx_private, tangent

#: A tangent row whose Jacobian is this small relative to the normal row's (squared
#: norms) cannot be moved by any joint (e.g. the out-of-plane tangent of a planar model)
#: and is dropped, so that ``G_ii`` stays invertible.
DEGENERATE_ROW = 1e-10
#: Relative determinant below which a diagonal block counts as singular (its inverse is
#: then zero, as Warp's 3 x 3 inverse returns for a zero determinant).
SINGULAR_BLOCK = 1e-12
#: The friction laws of ``MoreauContact.friction``.
FRICTION_LAWS = ("cone", "regularized")
#: ``eps`` (N^2 s^2) of the regularized friction law: keeps its denominator positive where
#: both the tangential impulse and ``mu p_n`` are zero; far below any impulse of the tasks
#: (a 1 g body resting for one 1 ms substep has ``p_n`` ~ 1e-5 N s, ``p_n^2`` ~ 1e-10), and
#: a normal float32 number.
FRICTION_EPS = 1e-20


@dataclasses.dataclass(frozen=True)
class MoreauContact:
    """Parameters of the authors' contact model (``contact_model="moreau"``).

    Attributes:
      kappa: sigmoid sharpness (1/m) of the impulse scale ``sigmoid(kappa * penetration)``;
        300 in the paper's training, 50 and 100 as ablations.
      prox_iterations: unrolled projected Gauss-Seidel sweeps (their ``prox_iter``; the
        project page lists 10 solver iterations).
      contact_margin: signed gap (m) at or below which a contact gets rows (their
        ``col_height``, 0.0: only while penetrating). Positive values let contacts act
        before touching, scaled by ``sigmoid(-kappa * gap)``.
      midpoint: Moreau midpoint stepping (their scheme). False evaluates the dynamics at
        the step's start and integrates ``q+ = q (+) qd+ h`` (a decomposition switch).
      implicit_damping: the velocity update (and ``G``) use the model integrator's
        ``M - h dF/dv`` (``implicitfast``: joint damping and the ``kv`` of actuators not
        force-clamped implicit, as MuJoCo steps the task) instead of their explicit ``M``. Explicit damping is
        unstable where ``h kv / I > 2``: free-floating G1 at 5 ms (ankle pitch kv 4,
        ``h kv (M^-1)_jj = 2.1``; the linearized PD dynamics grow 12 % per substep; in
        flight from 1 rad/s joint speeds they reach 13 rad/s within 3 control steps and
        stay there, held by the torque limits, where the implicit update decays to
        0.6 rad/s), which would make exact gradients explode for a reason unrelated to
        contact. False is their scheme (stable on BoxPush and PlanarHand, and on G1 at
        4 ms or with its feet on the ground).
      step_cap: bound their prox step ``r_i = 1 / (1 + sum_j det G_ij)`` by
        ``1 / ||G_ii||_inf`` (a bound on ``1 / lambda_max(G_ii)``), so that no block update
        overshoots. False is their kernels exactly. Their step is tuned to kilogram-scale
        robots (the determinants have units kg^-3): on light or planar contacts it
        diverges (PlanarHand: every block determinant is 0, so r = 1 with ``G_ii`` ~ 20 /kg,
        and impulses grow to kN within one control step). On G1 standing the cap binds on
        the front foot spheres (0.68 vs 0.75) and changes the total normal impulse of a
        substep by 1 %.
      friction: the friction law inside the prox iterations. ``"cone"`` (default) is their
        hard Coulomb cone (``project_cone``): the tangential impulse is scaled back radially
        to ``mu p_n`` where longer, a kink in the iteration map at ``|p_t| = mu p_n``.
        ``"regularized"`` (a decomposition switch, not theirs) replaces that scaling by the
        smooth saturation ``p_t mu p_n / sqrt(|p_t|^2 + (mu p_n)^2 + eps)``
        (``regularize_friction``); the normal impulse keeps its hard clamp at 0. Its width
        in slip velocity is set by the prox step and is wide for light bodies: it weakens
        sliding friction too (65 % of the cone's on a 0.5 kg ball sliding at 2 m/s).
    """

    kappa: float = 300.0
    prox_iterations: int = 10
    contact_margin: float = 0.0
    midpoint: bool = True
    implicit_damping: bool = True
    step_cap: bool = True
    friction: str = "cone"

    def __post_init__(self) -> None:
        kappa = self.kappa
        if not isinstance(kappa, jax.core.Tracer):  # traced: ``Physics.with_contact_stiffness``
            if isinstance(kappa, bool) or not isinstance(kappa, (int, float)) or not np.isfinite(kappa) or kappa <= 0:
                raise ValueError(f"kappa must be a positive finite number (1/m), got {kappa!r}")
        iterations = self.prox_iterations
        if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
            raise ValueError(f"prox_iterations must be a non-negative integer, got {iterations!r}")
        margin = self.contact_margin
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not np.isfinite(margin):
            raise ValueError(f"contact_margin must be a finite number (m), got {margin!r}")
        for name in ("midpoint", "implicit_damping", "step_cap"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if not isinstance(self.friction, str) or self.friction not in FRICTION_LAWS:
            raise ValueError(f"friction must be one of {FRICTION_LAWS}, got {self.friction!r}")


def dense_mass(m: mjx.Model, d: mjx.Data) -> jax.Array:
    """The joint-space inertia matrix ``M`` (armature included) as a dense (nv, nv) array."""
    return mjx.full_m(m, d)


def contact_jacobians(m: mjx.Model, d: mjx.Data) -> jax.Array:
    """(ncon, 3, nv): per contact, the velocity of geom 2's contact point relative to geom
    1's in the contact frame (rows: normal from geom 1 to geom 2, tangent 1, tangent 2).
    A positive normal row is a separating velocity."""
    contact = mjx_private.contact(d)
    body = jnp.asarray(m.geom_bodyid)[contact.geom]

    def one(point, bodies, frame):
        j1, _ = mjx.jac(m, d, point, bodies[0])
        j2, _ = mjx.jac(m, d, point, bodies[1])
        return frame.reshape(3, 3) @ (j2 - j1).T

    return jax.vmap(one)(contact.pos, body, contact.frame)


def _det3(a: jax.Array) -> jax.Array:
    """Determinants of (..., 3, 3) blocks by cofactors (differentiable at singular blocks)."""
    return (
        a[..., 0, 0] * (a[..., 1, 1] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 1])
        - a[..., 0, 1] * (a[..., 1, 0] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 0])
        + a[..., 0, 2] * (a[..., 1, 0] * a[..., 2, 1] - a[..., 1, 1] * a[..., 2, 0])
    )


def project_cone(p: jax.Array, mu: jax.Array) -> jax.Array:
    """The hard Coulomb cone projection of their kernels on one impulse ``(p_n, p_t1,
    p_t2)``: zero if ``p_n <= 0``; else the tangential part scaled to ``mu p_n`` where it
    is longer (a radial scaling, not the Euclidean projection onto the cone)."""
    pn, pt = p[0], p[1:]
    t2 = jnp.sum(pt**2)
    nonzero = t2 > 0
    length = jnp.sqrt(jnp.where(nonzero, t2, 1.0))
    limit = mu * pn
    scale = jnp.where(nonzero & (limit < length), limit / length, 1.0)
    return jnp.where(pn > 0, jnp.concatenate([pn[None], pt * scale]), 0.0)


def regularize_friction(p: jax.Array, mu: jax.Array) -> jax.Array:
    """The smooth friction law (``MoreauContact.friction="regularized"``) on one impulse
    ``(p_n, p_t1, p_t2)``: zero if ``p_n <= 0`` (the normal clamp of ``project_cone``);
    else the tangential part saturated smoothly at ``L = mu p_n``:
    ``p_t L / sqrt(|p_t|^2 + L^2 + eps)``.

    Why this saturation (rather than ``L tanh(|p_t| / L) p_t / |p_t|``): it is one smooth
    expression of ``p_t`` and ``L`` with no ``|p_t|`` (whose derivative is undefined at
    ``p_t = 0``, where a sticking contact sits) and no division by ``L`` (zero at a grazing
    contact), so it is infinitely differentiable everywhere for ``eps > 0`` without
    branches; its derivatives are bounded (``d/dp_t`` at most 1, ``d/dL`` at most 1 in
    norm), so it adds no gradient spikes of its own. Its length never exceeds ``L`` (the
    cone's bound), is ``L`` to within 0.5 % once ``|p_t| > 10 L`` (hard sliding), and
    shrinks a small tangential impulse by ``1 - |p_t|^2 / (2 L^2)`` (tanh: ``1 -
    |p_t|^2 / (3 L^2)``).

    Inside the prox iterations the law acts on ``x = p_t - r v_t`` (``v_t`` the contact's
    tangential velocity, ``r`` the prox step), so its fixed point ``p_t = sat(x)`` ties the
    impulse to the slip through ``sat^-1(p_t) - p_t = -r v_t``: a regularized Coulomb law
    whose width in slip velocity is about ``L / r``, set by the prox step, not chosen.
    Their step ``r = 1 / (1 + sum det G)`` is small for light bodies, so the width can be
    large: on the 0.5 kg ball of the tests (``r = 1/99``, ``L = 0.06`` N s per 5 ms
    substep) friction is 65 % of the cone's at 2 m/s slip, 81 % at 5 m/s and 96 % at
    20 m/s (10 and 50 sweeps agree). The switch therefore weakens friction as well as
    smoothing it; a sticking contact creeps at about ``|p_t|^3 / (2 L^2 r)``."""
    pn, pt = p[0], p[1:]
    limit = mu * pn
    scale = limit / jnp.sqrt(jnp.sum(pt**2) + limit**2 + FRICTION_EPS)
    return jnp.where(pn > 0, jnp.concatenate([pn[None], pt * scale]), 0.0)


def step_sizes(blocks: jax.Array, cap: bool) -> jax.Array:
    """Per contact the prox step ``r_i = 1 / (1 + sum_j det G_ij)`` of their kernels, and
    with ``cap`` at most ``1 / ||G_ii||_inf`` (``blocks`` (ncon, ncon, 3, 3))."""
    ncon = blocks.shape[0]
    r = 1.0 / (1.0 + jnp.sum(_det3(blocks), axis=1))
    if cap:
        diag = blocks[jnp.arange(ncon), jnp.arange(ncon)]
        bound = jnp.max(jnp.sum(jnp.abs(diag), axis=-1), axis=-1)  # >= the largest eigenvalue
        r = jnp.where(bound > 0, jnp.minimum(r, 1.0 / jnp.where(bound > 0, bound, 1.0)), r)
    return r


def solve_impulses(
    G: jax.Array,
    c: jax.Array,
    s: jax.Array,
    mu: jax.Array,
    rows: jax.Array,
    iterations: int,
    step_cap: bool = True,
    friction: str = "cone",
) -> jax.Array:
    """The unscaled impulses ``p`` (ncon, 3) of the smoothed prox iterations.

    ``G`` (ncon, 3, ncon, 3) Delassus blocks and ``c`` (ncon, 3) free contact velocities,
    both zero on missing rows; ``s`` (ncon,) sigmoid scales; ``mu`` (ncon,) friction;
    ``rows`` (ncon, 3) bool, which rows exist; ``step_cap`` and ``friction`` as
    ``MoreauContact.step_cap`` and ``MoreauContact.friction``.
    """
    if friction not in FRICTION_LAWS:
        raise ValueError(f"friction must be one of {FRICTION_LAWS}, got {friction!r}")
    project = project_cone if friction == "cone" else regularize_friction
    ncon = c.shape[0]
    blocks = jnp.transpose(G, (0, 2, 1, 3))  # (i, j, 3, 3)
    r = step_sizes(blocks, step_cap)  # (ncon,)
    diag = blocks[jnp.arange(ncon), jnp.arange(ncon)]  # (ncon, 3, 3)
    missing = jnp.eye(3, dtype=G.dtype) * (~rows).astype(G.dtype)[:, None, :]
    padded = diag + missing  # missing rows decouple with a unit diagonal
    scale = jnp.maximum(jnp.trace(padded, axis1=1, axis2=2) / 3.0, jnp.finfo(G.dtype).tiny)
    regular = jnp.any(rows, axis=1) & (jnp.abs(_det3(padded)) > SINGULAR_BLOCK * scale**3)
    safe = jnp.where(regular[:, None, None], padded, jnp.eye(3, dtype=G.dtype))
    p0 = -jnp.einsum("iab,ib->ia", jnp.linalg.inv(safe), c)
    p0 = jnp.where(regular[:, None], p0, 0.0)
    # coupling weights: s_j off the diagonal, 1 on it
    weights = jnp.where(jnp.eye(ncon, dtype=bool), 1.0, s[None, :]).astype(G.dtype)
    weighted = blocks * weights[:, :, None, None]

    def sweep(p, _):
        for i in range(ncon):
            residual = jnp.einsum("jab,jb->a", weighted[i], p) + c[i]
            p = p.at[i].set(project(p[i] - r[i] * residual, mu[i]))
        return p, None

    if iterations == 0 or ncon == 0:
        return p0
    p, _ = jax.lax.scan(sweep, p0, None, length=iterations)
    return p


def _rows(d: mjx.Data, J: jax.Array, margin: float) -> tuple[jax.Array, jax.Array]:
    """``(rows (ncon, 3) bool, mu (ncon,))``: which rows each contact gets, and its friction."""
    contact = mjx_private.contact(d)
    dim = np.asarray(contact.dim)
    frictional = dim > 1
    mu = jnp.where(jnp.asarray(frictional), contact.friction[:, 0], 0.0)
    active = contact.dist <= margin
    norms = jax.lax.stop_gradient(jnp.sum(J**2, axis=-1))  # (ncon, 3)
    movable = norms[:, 1:] > DEGENERATE_ROW * jnp.maximum(norms[:, :1], jnp.finfo(J.dtype).tiny)
    tangent_rows = jnp.asarray(frictional)[:, None] & movable & (mu[:, None] > 0)
    rows = active[:, None] & jnp.concatenate([jnp.ones_like(active)[:, None], tangent_rows], axis=1)
    return rows, mu


def step(
    params: MoreauContact, mj_model: mujoco.MjModel, m: mjx.Model, d: mjx.Data, normal_rows: Optional[np.ndarray] = None
) -> mjx.Data:
    """One physics substep of the Moreau model (``m`` must have gone through
    ``penalty_contact.disable_constraint_contacts``). The returned data holds the new
    ``qpos``/``qvel``/``act``/``time``; its derived quantities (kinematics, contacts,
    forces) are those of the midpoint, as ``mjx.step`` leaves those of the step's start.
    ``qacc`` is the step's mean acceleration ``(qd+ - qd) / h``; each contact's normal
    force (N) goes to its ``efc_force`` row ``normal_rows[c]`` (-1: none)."""
    h = m.opt.timestep
    q0, v0 = d.qpos, d.qvel
    q_eval = tangent.integrate_pos(mj_model, q0, v0 * (0.5 * h)) if params.midpoint else q0
    dm = implicit_step.forward(m, d.replace(qpos=q_eval))
    if params.implicit_damping:  # (M - h dF/dv) of the model's integrator
        factor = jax.scipy.linalg.cho_factor(implicit_step.integration_mass(m, dm))
        solve = lambda x: jax.scipy.linalg.cho_solve(factor, x)
        qacc_free = solve(dm.qfrc_smooth + dm.qfrc_constraint)
    else:  # explicit, as their kernels: dm.qacc = M^-1 (qfrc_smooth + qfrc_constraint)
        factor = jax.scipy.linalg.cho_factor(dense_mass(m, dm))
        solve = lambda x: jax.scipy.linalg.cho_solve(factor, x)
        qacc_free = dm.qacc

    contact = mjx_private.contact(dm)
    ncon = contact.dist.shape[0]
    if ncon:
        J = contact_jacobians(m, dm)  # (ncon, 3, nv)
        rows, mu = _rows(dm, J, params.contact_margin)
        J = J * rows[..., None].astype(J.dtype)
        nv = J.shape[-1]
        flat = J.reshape(-1, nv)
        G = (flat @ solve(flat.T)).reshape(ncon, 3, ncon, 3)
        c = J @ (v0 + h * qacc_free)  # (ncon, 3)
        s = jax.nn.sigmoid(params.kappa * (-contact.dist))
        p = solve_impulses(G, c, s, mu, rows, int(params.prox_iterations), params.step_cap, params.friction)
        impulse = s[:, None] * p  # (ncon, 3), N s
        qimp = jnp.einsum("cjv,cj->v", J, impulse)  # generalized impulse Jc^T (s p)
    else:
        impulse = jnp.zeros((0, 3), v0.dtype)
        qimp = jnp.zeros_like(v0)
    dv_contact = solve(qimp)
    qfrc_contact = qimp / h

    v1 = v0 + h * qacc_free + dv_contact
    if params.midpoint:
        q1 = tangent.integrate_pos(mj_model, q0, (v0 + v1) * (0.5 * h))
    else:
        q1 = tangent.integrate_pos(mj_model, q0, v1 * h)
    qacc = qacc_free + dv_contact / h
    act = mjx_private.next_activation(m, dm, dm.act_dot) if mj_model.na else d.act
    out = dm.replace(
        qpos=q1,
        qvel=v1,
        act=act,
        qacc=qacc,
        qacc_warmstart=dm.qacc,  # the solver's answer (non-contact constraints only)
        qfrc_constraint=dm.qfrc_constraint + qfrc_contact,
        time=d.time + h,
    )
    rows_idx = np.zeros(0, int) if normal_rows is None else np.asarray(normal_rows)
    if rows_idx.size and np.any(rows_idx >= 0):
        keep = np.flatnonzero(rows_idx >= 0)
        force = mjx_private.efc_force(out).at[rows_idx[keep]].set(impulse[keep, 0] / h)
        out = mjx_private.with_efc_force(out, force)
    return out
