"""The control step as a differentiable JAX function whose backward pass is an estimator.

The physics step (``physics/implicit_step.py``) keeps MJX's solver loop out of every
derivative, so reverse mode runs through it. Each control step is a ``jax.custom_vjp``:

* the forward pass runs the step once and keeps only its inputs (one ``mjx.Data``),
  so a rollout's memory grows by one state per step, not by every solver intermediate
  (the backward pass recomputes the step: rematerialization). ``exact`` on a small model
  instead keeps the step's linearization when it takes at most ``LINEARIZATION_BUDGET``
  bytes per step (BoxPush, PlanarHand, G1 at its own 4 ms timestep; not G1 at 1 ms),
  which saves the recomputation; so does ``bcg`` without branch rollouts (and with
  ``forward="nominal"``), whose untriggered steps are exact and whose triggered steps
  recompute their bundle in the backward pass;
* the backward pass pulls the cotangent back with vector-Jacobian products, never
  forming ``(A, B)``: ``exact`` is the VJP of the step (the implicit step applies
  ``H^-1`` to the cotangent), ``bundle`` and triggered ``bcg`` steps the mean of the
  branches' VJPs; ``zeroth`` and ``alpha`` fit ``(A, B)`` from forward samples (what
  they are) and apply their transposes.

``jacobians`` builds the full ``(A, B)`` with forward mode for ``grad_step``, and
``backward="jacobians"`` routes the backward pass through them (the previous design:
``nx + nu`` tangent columns per step) for comparison and as a test reference.

**Branch rollouts** (``bcg`` with ``horizon`` H > 1, the paper's bundle): at a step whose
contact force crosses the threshold (outside a running window), B perturbed copies of
the state (the branches) are drawn and each is rolled H control steps under the same
actions as the nominal trajectory; their states travel with the env state. Inside the
window the env state's value is the nominal one (``forward="nominal"``) or the branch
mean (``forward="mean"``), and its derivative is the mean over valid branches of the
branches' derivatives: a rollout gradient through the window is the mean of the B
branch products ``A_H^b ... A_1^b``, not a product of per-step means. A branch that
diverges (``bcg_envs.physics.divergence``) is dropped for the rest of the window.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from mujoco import mjx

from bcg_envs.cpu_runtime import mlir_single_threaded
from bcg_envs.gradients import estimators
from bcg_envs.gradients.config import BundleConfig, samples_for
from bcg_envs.gradients.perturbations import (
    contact_jacobian,
    contact_sampler,
    floating_base_dofs,
    global_sampler,
    global_sigma,
    sampled_contacts,
)
from bcg_envs.gradients.registry import Estimator, resolve
from bcg_envs.gradients.trigger import bundle_decision
from bcg_envs.physics import divergence, tangent
from bcg_envs.physics.simulator import ContactReport, Physics, control_step_with_contacts, refresh


class Branches(NamedTuple):
    """The states of a running branch rollout: ``z`` (B, nq + nv + na) holds each
    branch's (qpos, qvel, act); ``valid`` (B,) which branches are still kept."""

    z: jnp.ndarray
    valid: jnp.ndarray


class StepResult(NamedTuple):
    """One control step: the next data (state fields differentiable) and diagnostics."""

    data: mjx.Data
    contact_force: jnp.ndarray  # (ncon,) per slot, its contact event's largest force over the substeps, N
    contact_rise: jnp.ndarray  # (ncon,) that force minus the event's force at the step's start, N
    point_force: jnp.ndarray  # (ncon,) per slot, the largest force of one of its event's contacts, N
    bundled: jnp.ndarray  # bool: the estimator bundled at this step
    bundle_window: jnp.ndarray  # int: steps the triggered bcg bundle stays active
    stats: Dict[str, jnp.ndarray]
    branches: Branches  # branch states carried to the next step (B = 0 without rollouts)


class KeptLinearization(NamedTuple):
    """What the forward pass of ``exact`` (and of ``bcg`` without branch rollouts) keeps
    for the backward pass when the step's linearization fits ``LINEARIZATION_BUDGET``:
    its VJP and the chart points; ``bcg`` also keeps the step's inputs, from which a
    triggered step recomputes its bundle."""

    pull: Callable  # g_y -> (A^T g_y, B^T g_y), a jax.tree_util.Partial holding the residuals
    qpos0: jnp.ndarray
    qpos1: jnp.ndarray
    traced: tuple | None  # Physics.traced of the step
    bundle_inputs: tuple | None = None  # bcg: (data0, action, key, contact, trigger, ref_next)


class Configuration(NamedTuple):
    """The differentiable part of a state: what tangent offsets are measured from."""

    qpos: jnp.ndarray
    qvel: jnp.ndarray
    act: jnp.ndarray


#: How the backward pass of a control step is computed (see the module docstring).
BACKWARDS = ("vjp", "jacobians")

#: Bytes per env and control step up to which ``exact``'s forward pass keeps the step's
#: linearization for the backward pass instead of recomputing the step there: 64 envs x
#: 32 steps (SHAC's batch) then hold at most 2 GiB.
LINEARIZATION_BUDGET = 1 << 20


@dataclasses.dataclass(frozen=True, eq=False)
class DifferentiableStep:
    """``step(data, action, key, window) -> StepResult``, differentiable by ``estimator``.

    ``action_to_ctrl`` maps the normalized action to MuJoCo ``ctrl``; ``config`` must have
    its ``force_threshold`` filled in (``BundleConfig.with_defaults``). ``backward`` is
    ``"vjp"`` (reverse mode, the default) or ``"jacobians"`` (transposed full Jacobians).
    ``estimator`` is an ``Estimator`` or its name (held as the ``Estimator``).
    """

    physics: Physics
    action_to_ctrl: Callable[[jnp.ndarray], jnp.ndarray]
    estimator: Estimator
    config: BundleConfig
    backward: str = "vjp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "estimator", resolve(self.estimator))
        if self.backward not in BACKWARDS:
            raise ValueError(f"backward must be one of {BACKWARDS}, got {self.backward!r}")
        if self.config.force_threshold is None:
            raise ValueError("DifferentiableStep needs config.force_threshold set")
        m = self.physics.mj_model
        object.__setattr__(self, "nv", int(m.nv))
        object.__setattr__(self, "na", int(m.na))
        object.__setattr__(self, "nu", int(m.nu))
        object.__setattr__(self, "nx", 2 * int(m.nv) + int(m.na))
        object.__setattr__(self, "num_samples", samples_for(self.config, self.estimator, self.nx, self.nu))
        object.__setattr__(self, "branching", self.estimator.rolls_branches(self.config.horizon))
        object.__setattr__(self, "num_branches", self.num_samples if self.branching else 0)
        object.__setattr__(self, "nz", int(m.nq) + int(m.nv) + int(m.na))
        object.__setattr__(self, "_quat", tangent.has_quaternions(m))
        object.__setattr__(self, "_body_of_geom", np.asarray(m.geom_bodyid, np.int32))
        # Bytes of one step's kept linearization per env, set by keeps_linearization.
        object.__setattr__(self, "linearization_size", None)
        # Jitted once per instance: JAX caches the traced jaxpr, so the repeated traces
        # that reverse-mode scans and custom_vjp make of these are nearly free.
        # The triggered pairs take Physics.traced (traced stiffness and model fields, or
        # None) as their first argument.
        at = self._at_traced_argument
        object.__setattr__(self, "_bcg_step_jacobians", triggered_bundle(at("_exact_jacobians"), at("_jacobians")))
        object.__setattr__(self, "_bcg_step_vjp", triggered_bundle(at("_exact_vjp"), at("_bundle_vjp")))
        object.__setattr__(self, "_bcg_kept_vjp", triggered_bundle(at("_kept_vjp"), at("_bundle_vjp_given_kept")))
        object.__setattr__(self, "forward", jax.jit(self._forward))
        object.__setattr__(self, "jacobians", jax.jit(self._jacobians_at))
        build = self._build_vjp_step if self.backward == "vjp" else self._build_jacobian_product_step
        object.__setattr__(self, "_vjp_step", build())
        if self.branching:
            object.__setattr__(self, "_branches_forward", triggered_bundle(at("_no_branches"), at("_roll_branches")))
            object.__setattr__(
                self, "_branch_backward", triggered_bundle(at("_exact_backward"), at("_branches_backward"))
            )
            object.__setattr__(self, "_branch_step", self._build_branch_step())

    # ----- tangent coordinates -------------------------------------------------------
    def displace(self, data: mjx.Data, dx: jnp.ndarray) -> mjx.Data:
        """``data`` with its state moved by the tangent offset ``dx``."""
        nv = self.nv
        return data.replace(
            qpos=tangent.integrate_pos(self.physics.mj_model, data.qpos, dx[:nv]),
            qvel=data.qvel + dx[nv : 2 * nv],
            act=data.act + dx[2 * nv :],
        )

    def offset(self, data: mjx.Data, ref: "mjx.Data | Configuration") -> jnp.ndarray:
        """Tangent offset of ``data``'s state from ``ref``'s."""
        dq = tangent.difference_pos(self.physics.mj_model, data.qpos, ref.qpos)
        return jnp.concatenate([dq, data.qvel - ref.qvel, data.act - ref.act])

    def transition(self, data0: mjx.Data, action: jnp.ndarray, ref_next: "mjx.Data | Configuration"):
        """``f(dx, du)``: next-state offset from ``ref_next`` after stepping from
        ``data0 (+) dx`` with ``action + du``."""

        def f(dx, du):
            d1 = self.physics.control_step(self.displace(data0, dx), self.action_to_ctrl(action + du))
            return self.offset(d1, ref_next)

        return f

    # ----- estimators ----------------------------------------------------------------
    def offsets(self, data0: mjx.Data, action: jnp.ndarray, key: jax.Array, contact) -> Tuple[jnp.ndarray, jnp.ndarray]:
        """Bundle offsets (tangent state, action) of this step's estimator, (B, nx) and (B, nu);
        ``contact`` is ``control_step_with_contacts``' report of the nominal step (bcg
        perturbs the contacting chain)."""
        cfg = self.config
        if self.estimator.contact_local:
            force, points, geoms = contact.force, contact.points, contact.geoms
            pressing = self._pressing(contact)
            active = sampled_contacts(pressing, force)
            bodies = jnp.asarray(self._body_of_geom)[jnp.maximum(geoms, 0)]
            jac = contact_jacobian(self.physics.model, bodies, data0, points, active & jnp.all(geoms >= 0, axis=1))
            perturbable = None if cfg.perturb_base else ~floating_base_dofs(self.physics.mj_model)
            sampler = contact_sampler(jac, active, self.nx, self.nv, self.nu, cfg, perturbable)
        else:
            sigma = global_sigma(self.nv, self.na, self.nu, cfg, zeroth=self.estimator.least_squares)
            sampler = global_sampler(jnp.asarray(sigma, jnp.float32), self.nx)
        return estimators.sample_offsets(sampler, key, self.num_samples, cfg.antithetic)

    def _sigma(self):
        return jnp.asarray(global_sigma(self.nv, self.na, self.nu, self.config, zeroth=True), jnp.float32)

    def _jacobians(self, data0, action, key, contact, next_data):
        """The estimator's ``(A, B, stats)`` on a bundled step (exact's: the exact ones)."""
        return self.estimator.bundled(_AutodiffJacobians(self, data0, action, key, contact, next_data))

    def _exact_jacobians(self, data0, action, key, contact, next_data):
        return estimators.exact(self.transition(data0, action, next_data), self.nx, self.nu)

    # ----- vector-Jacobian products (the backward pass) -----------------------------------
    def _exact_vjp(self, data0, action, key, contact, ref_next, g_y):
        """``(A^T g_y, B^T g_y)`` of the exact step, by reverse mode."""
        f = self.transition(data0, action, ref_next)
        _, pull = jax.vjp(f, jnp.zeros(self.nx, g_y.dtype), jnp.zeros(self.nu, g_y.dtype))
        return pull(g_y)

    def _bundle_vjp(self, data0, action, key, contact, ref_next, g_y):
        """Mean over the valid branches of each branch's VJP: ``(mean_i A_i)^T g_y``
        without forming ``A_i``. A branch whose next state or VJP is non-finite is
        dropped, as in the Jacobian bundle."""
        f = self.transition(data0, action, ref_next)
        dx, du = self.offsets(data0, action, key, contact)

        def branch(dxi, dui):
            y, pull = jax.vjp(f, dxi, dui)
            return (y,) + pull(g_y)

        y, g_x, g_u = jax.vmap(branch)(dx, du)
        valid = estimators.finite_rows(y, g_x, g_u)
        return estimators.masked_mean(g_x, valid), estimators.masked_mean(g_u, valid)

    def _kept_vjp(self, pull, data0, action, key, contact, ref_next, g_y):
        """``(A^T g_y, B^T g_y)`` from the linearization the forward pass kept."""
        return pull(g_y)

    def _bundle_vjp_given_kept(self, pull, *args):
        """``_bundle_vjp``, with the (unused) kept linearization in the argument list."""
        return self._bundle_vjp(*args)

    def _vjp(self, data0, action, key, contact, trigger, ref_next, g_y):
        """The estimator's ``(A^T g_y, B^T g_y)`` at this step."""
        args = (data0, action, key, contact, ref_next, g_y)
        if self.estimator.triggered:
            return self._bcg_step_vjp(trigger, self.physics.traced, *args)
        return self.estimator.bundled(_AutodiffVJPs(self, args))

    def _pressing(self, contact: ContactReport) -> jnp.ndarray:
        """Per slot, whether its contact event fires the ``bcg`` trigger
        (``BundleConfig.trigger``: the event's force, its rise within the step, or the
        force of one of its contacts)."""
        measure = {"force": contact.force, "onset": contact.rise, "point": contact.point_force}[self.config.trigger]
        return measure > self.config.force_threshold

    def _trigger(self, contact, window):
        return bundle_decision(self.estimator, jnp.any(self._pressing(contact)), window, self.config.horizon)[0]

    def _next_window(self, contact, window):
        return bundle_decision(self.estimator, jnp.any(self._pressing(contact)), window, self.config.horizon)[1]

    # ----- forward pass ----------------------------------------------------------------
    def _forward(self, data0, action, key, window):
        nominal, contact = control_step_with_contacts(self.physics, data0, self.action_to_ctrl(action))
        trigger = self._trigger(contact, window)
        next_data = nominal
        if self.config.forward == "mean" and self.estimator.samples:
            f = self.transition(data0, action, nominal)
            dx, du = self.offsets(data0, action, key, contact)
            ys = jax.vmap(f)(dx, du)
            ok = jnp.all(jnp.isfinite(ys), axis=1)
            mean = jnp.sum(jnp.where(ok[:, None], ys, 0.0), 0) / jnp.maximum(jnp.sum(ok), 1)
            mean = jnp.where(trigger, mean, 0.0)
            next_data = self.displace(nominal, mean)
        return nominal, next_data, contact, trigger

    def _jacobians_at(self, data0: mjx.Data, action: jnp.ndarray, key: jax.Array, window: jnp.ndarray):
        """Next step plus the estimator's (A, B) in tangent coordinates and its stats."""
        nominal, next_data, contact, trigger = self.forward(data0, action, key, window)
        if self.estimator.triggered:
            A, B, stats = self._bcg_step_jacobians(trigger, self.physics.traced, data0, action, key, contact, next_data)
        else:
            A, B, stats = self._jacobians(data0, action, key, contact, next_data)
        # A non-finite Jacobian (every branch dropped, or a diverging step) becomes zero, so
        # that a zero cotangent through it (jnp.where on divergence) stays zero, not NaN.
        finite = jnp.all(jnp.isfinite(A)) & jnp.all(jnp.isfinite(B))
        A, B = jnp.where(finite, A, 0.0), jnp.where(finite, B, 0.0)
        return (next_data, contact, trigger), (A, B), stats

    def _tangent_cotangent(self, qpos1, g_qpos, g_qvel, g_act):
        """The cotangent of the next state's (qpos, qvel, act) in tangent coordinates:
        qpos cotangents live in R^nq and map through the tangent chart at ``qpos1``."""
        if self._quat:
            J_int = jax.jacfwd(lambda v: tangent.integrate_pos(self.physics.mj_model, qpos1, v))(jnp.zeros(self.nv))
            g_qpos = J_int.T @ g_qpos
        return jnp.concatenate([g_qpos, g_qvel, g_act])

    def _state_cotangent(self, qpos0, g_x, g_u):
        """Tangent-coordinate cotangents ``(g_x, g_u)`` as the step's input cotangents
        ``(qpos, qvel, act, action, data, key, window)``."""
        nv = self.nv
        g_dq0 = g_x[:nv]
        if self._quat:
            J_diff = jax.jacfwd(lambda q: tangent.difference_pos(self.physics.mj_model, q, qpos0))(qpos0)
            g_dq0 = J_diff.T @ g_dq0
        return (g_dq0, g_x[nv : 2 * nv], g_x[2 * nv :], g_u, None, None, None, None)

    def _at_traced_argument(self, name: str) -> Callable:
        """Method ``name`` as ``f(traced, *args)``, run on ``at_traced(traced)``:
        a custom_vmap that is batched after its trace must not close over a tracer."""
        return lambda traced, *args: getattr(self.at_traced(traced), name)(*args)

    def at_traced(self, traced: tuple | None) -> "DifferentiableStep":
        """This step with its physics at ``traced`` (``Physics.traced``: a traced contact
        stiffness and an episode's model fields; None: itself). The custom rules below
        take them as an argument and rebuild the step from it: JAX cannot lower a
        custom_vjp that closes over a tracer."""
        if traced is None:
            return self
        copy = dataclasses.replace(self, physics=self.physics.at(traced))
        object.__setattr__(copy, "linearization_size", self.linearization_size)
        return copy

    def _linearized_step(self, data0: mjx.Data, action: jnp.ndarray):
        """``(pull, next data, contact report)``: the step from ``data0`` and its VJP
        ``pull(g_y) -> (A^T g_y, B^T g_y)`` in tangent coordinates, from one forward pass."""

        def f(dx, du):
            d1, contact = control_step_with_contacts(
                self.physics, self.displace(data0, dx), self.action_to_ctrl(action + du)
            )
            return self.offset(d1, jax.lax.stop_gradient(d1)), (d1, contact)

        zx, zu = jnp.zeros(self.nx, data0.qvel.dtype), jnp.zeros(self.nu, action.dtype)
        _, pull, (next_data, contact) = jax.vjp(f, zx, zu, has_aux=True)
        return pull, next_data, contact

    def keeps_linearization(self, data0: mjx.Data, action: jnp.ndarray) -> bool:
        """Whether the forward pass keeps the step's linearization (``exact``, or ``bcg``
        without branch rollouts and with ``forward="nominal"``, whose linearization fits
        ``LINEARIZATION_BUDGET``; from shapes alone, once per step)."""
        if not self.estimator.has_exact_steps or self.branching or self.config.forward == "mean":
            return False
        if self.linearization_size is None:
            pull = jax.eval_shape(lambda d, a: self._linearized_step(d, a)[0], data0, action)
            size = sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(pull))
            object.__setattr__(self, "linearization_size", size)
        return self.linearization_size <= LINEARIZATION_BUDGET

    def _primal(self, qpos, qvel, act, action, data0, key, window, traced):
        """The step as the custom_vjp sees it: ((qpos, qvel, act), aux) of the next state."""
        data0 = data0.replace(qpos=qpos, qvel=qvel, act=act)
        _, next_data, contact, trigger = self.at_traced(traced).forward(data0, action, key, window)
        return (next_data.qpos, next_data.qvel, next_data.act), (next_data, contact, trigger)

    def _build_vjp_step(self):
        """The custom_vjp step whose backward pass pulls the cotangent back by the
        estimator's VJP (no full Jacobians): from the linearization the forward pass kept
        (``keeps_linearization``), else after recomputing the step."""

        def fwd(qpos, qvel, act, action, data0, key, window, traced):
            data1 = data0.replace(qpos=qpos, qvel=qvel, act=act)
            me = self.at_traced(traced)  # never self's physics: it may hold tracers of an outer vmap
            if me.keeps_linearization(data1, action):
                object.__setattr__(self, "linearization_size", me.linearization_size)  # from shapes: shared
                pull, next_data, contact = me._linearized_step(data1, action)
                trigger = me._trigger(contact, window)
                out = (next_data.qpos, next_data.qvel, next_data.act), (next_data, contact, trigger)
                inputs = None
                if self.estimator.triggered:
                    ref = Configuration(next_data.qpos, next_data.qvel, next_data.act)
                    inputs = (data1, action, key, contact, trigger, ref)
                return out, KeptLinearization(pull, qpos, next_data.qpos, traced, inputs)
            out = self._primal(qpos, qvel, act, action, data0, key, window, traced)
            (qpos1, qvel1, act1), (_, contact, trigger) = out
            return out, (data1, action, key, contact, trigger, Configuration(qpos1, qvel1, act1), traced)

        def bwd(res, cotangent):
            (g_qpos, g_qvel, g_act), _ = cotangent
            if isinstance(res, KeptLinearization):
                me = self.at_traced(res.traced)
                qpos0 = res.qpos0
                g_y = me._tangent_cotangent(res.qpos1, g_qpos, g_qvel, g_act)
                if res.bundle_inputs is None:
                    g_x, g_u = res.pull(g_y)
                else:
                    data0, action, key, contact, trigger, ref = res.bundle_inputs
                    g_x, g_u = self._bcg_kept_vjp(trigger, res.traced, res.pull, data0, action, key, contact, ref, g_y)
            else:
                data0, action, key, contact, trigger, ref, traced = res
                me = self.at_traced(traced)
                qpos0 = data0.qpos
                g_y = me._tangent_cotangent(ref.qpos, g_qpos, g_qvel, g_act)
                g_x, g_u = me._vjp(data0, action, key, contact, trigger, ref, g_y)
            # A step whose own linearization is non-finite (every branch dropped, or a
            # diverging step whose state the env reverts) passes a zero cotangent back;
            # a non-finite incoming cotangent still propagates.
            ok = jnp.all(jnp.isfinite(g_x)) & jnp.all(jnp.isfinite(g_u))
            ok = ok | ~jnp.all(jnp.isfinite(g_y))
            g_x, g_u = jnp.where(ok, g_x, 0.0), jnp.where(ok, g_u, 0.0)
            return me._state_cotangent(qpos0, g_x, g_u)

        step = jax.custom_vjp(self._primal)
        step.defvjp(fwd, bwd)
        return step

    def _build_jacobian_product_step(self):
        """The custom_vjp step whose backward pass applies transposed full Jacobians."""

        def fwd(qpos, qvel, act, action, data0, key, window, traced):
            data0 = data0.replace(qpos=qpos, qvel=qvel, act=act)
            (next_data, contact, trigger), (A, B), _ = self.at_traced(traced).jacobians(data0, action, key, window)
            out = (next_data.qpos, next_data.qvel, next_data.act), (next_data, contact, trigger)
            return out, (A, B, qpos, next_data.qpos)

        def bwd(res, cotangent):
            A, B, qpos0, qpos1 = res
            (g_qpos, g_qvel, g_act), _ = cotangent
            g_y = self._tangent_cotangent(qpos1, g_qpos, g_qvel, g_act)
            return self._state_cotangent(qpos0, A.T @ g_y, B.T @ g_y)

        step = jax.custom_vjp(self._primal)
        step.defvjp(fwd, bwd)
        return step

    # ----- branch rollouts (bcg, horizon > 1) ------------------------------------------------
    def empty_branches(self, dtype=jnp.float32) -> Branches:
        """No running branch rollout (the state of a fresh episode)."""
        return Branches(jnp.zeros((self.num_branches, self.nz), dtype), jnp.zeros((self.num_branches,), bool))

    def _raw(self, data: mjx.Data) -> jnp.ndarray:
        return jnp.concatenate([data.qpos, data.qvel, data.act])

    def _with_raw(self, data: mjx.Data, z: jnp.ndarray) -> mjx.Data:
        nq, nv = int(self.physics.mj_model.nq), self.nv
        return data.replace(qpos=z[:nq], qvel=z[nq : nq + nv], act=z[nq + nv :])

    def _advance_branch(self, data0: mjx.Data, z: jnp.ndarray, u: jnp.ndarray) -> jnp.ndarray:
        """One control step of the branch at ``z`` under action ``u`` (``data0`` supplies
        the constants of the step: warm start, contact slots)."""
        return self._raw(self.physics.control_step(self._with_raw(data0, z), self.action_to_ctrl(u)))

    def _branch_inputs(self, start, data0, action, key, contact, branches):
        """Branch states and actions entering this step: fresh perturbations of ``data0``
        where a window ``start``s, else the carried branches under the nominal action."""
        dx, du = self.offsets(data0, action, key, contact)
        fresh = jax.vmap(lambda d: self._raw(self.displace(data0, d)))(dx)
        z0 = jnp.where(start, fresh, branches.z)
        valid0 = jnp.where(start, jnp.ones_like(branches.valid), branches.valid)
        u0 = action + jnp.where(start, du, 0.0)
        return z0, valid0, u0, dx

    def _roll_branches(self, start, data0, action, key, contact, branches) -> Branches:
        z0, valid0, u0, _ = self._branch_inputs(start, data0, action, key, contact, branches)
        z1 = jax.vmap(lambda z, u: self._advance_branch(data0, z, u))(z0, u0)
        nq, nv = int(self.physics.mj_model.nq), self.nv
        ok = valid0 & ~divergence.diverged(z1[:, :nq], z1[:, nq : nq + nv], z1[:, nq + nv :], xp=jnp)
        return Branches(jnp.where(ok[:, None], z1, 0.0), ok)

    def _no_branches(self, start, data0, action, key, contact, branches) -> Branches:
        return Branches(jnp.zeros_like(branches.z), jnp.zeros_like(branches.valid))

    def _branch_window(self, contact, window):
        """``(start, active, next_window)`` of a step with branch rollouts: the window rule
        of ``bundle_decision``; a window ``start``s where the trigger fires outside one."""
        pressing = jnp.any(self._pressing(contact))
        active, next_window = bundle_decision(self.estimator, pressing, window, self.config.horizon)
        return pressing & (window == 0), active, next_window

    def _branching_primal(self, qpos, qvel, act, action, data0, key, window, branches):
        data0 = data0.replace(qpos=qpos, qvel=qvel, act=act)
        nominal, contact = control_step_with_contacts(self.physics, data0, self.action_to_ctrl(action))
        start, active, next_window = self._branch_window(contact, window)
        rolled = self._branches_forward(active, self.physics.traced, start, data0, action, key, contact, branches)
        next_data = nominal
        if self.config.forward == "mean":
            offsets = jax.vmap(lambda z: self.offset(self._with_raw(nominal, z), nominal))(rolled.z)
            mean = estimators.masked_mean(offsets, rolled.valid)
            next_data = self.displace(nominal, jnp.where(active & jnp.any(rolled.valid), mean, 0.0))
        keep = next_window > 0
        carried = Branches(jnp.where(keep, rolled.z, 0.0), rolled.valid & keep)
        dropped = jnp.where(active, jnp.sum(~rolled.valid), 0).astype(jnp.int32)
        aux = (next_data, contact, active, next_window, dropped)
        return (next_data.qpos, next_data.qvel, next_data.act, carried), (aux, (start, active, rolled))

    def _exact_backward(self, start, data0, action, key, contact, branches, rolled, ref, g_state, g_carried):
        """The exact step's input cotangents (no branch rollout at this step)."""
        nq, nv = int(self.physics.mj_model.nq), self.nv
        g_y = self._tangent_cotangent(ref.qpos, g_state[:nq], g_state[nq : nq + nv], g_state[nq + nv :])
        g_x, g_u = self._exact_vjp(data0, action, key, contact, ref, g_y)
        ok = (jnp.all(jnp.isfinite(g_x)) & jnp.all(jnp.isfinite(g_u))) | ~jnp.all(jnp.isfinite(g_y))
        g_x, g_u = jnp.where(ok, g_x, 0.0), jnp.where(ok, g_u, 0.0)
        g_qpos, g_qvel, g_act = self._state_cotangent(data0.qpos, g_x, g_u)[:3]
        return jnp.concatenate([g_qpos, g_qvel, g_act]), g_u, jnp.zeros_like(branches.z)

    def _branches_backward(self, start, data0, action, key, contact, branches, rolled, ref, g_state, g_carried):
        """Input cotangents of a step inside a branch rollout: the state's cotangent goes
        to the valid branches in equal shares (its derivative is their mean), each branch
        pulls its cotangent back through its own exact step, and the branch inputs
        collect them (into the state where the window starts here)."""
        z0, valid0, u0, dx = self._branch_inputs(start, data0, action, key, contact, branches)
        share = rolled.valid / jnp.maximum(jnp.sum(rolled.valid), 1)
        g_z1 = g_carried + share[:, None] * g_state[None, :]

        def pull(z, u, g):
            _, vjp = jax.vjp(lambda z_, u_: self._advance_branch(data0, z_, u_), z, u)
            return vjp(g)

        g_z0, g_u = jax.vmap(pull)(z0, u0, g_z1)
        ok = rolled.valid & estimators.finite_rows(g_z0, g_u)
        g_z0, g_u = jnp.where(ok[:, None], g_z0, 0.0), jnp.where(ok[:, None], g_u, 0.0)

        def fresh(state):
            d = self._with_raw(data0, state)
            return jax.vmap(lambda d_: self._raw(self.displace(d, d_)))(dx)

        _, pull_fresh = jax.vjp(fresh, self._raw(data0))
        g_start = pull_fresh(g_z0)[0]
        g_state0 = jnp.where(start, g_start, 0.0)
        g_branches = jnp.where(start, 0.0, g_z0)
        return g_state0, jnp.sum(g_u, axis=0), g_branches

    def _build_branch_step(self):
        """The custom_vjp step of ``bcg`` with branch rollouts (see the module docstring)."""

        def primal(qpos, qvel, act, action, data0, key, window, branches, traced):
            me = self.at_traced(traced)
            out, (aux, _) = me._branching_primal(qpos, qvel, act, action, data0, key, window, branches)
            return out, aux

        def fwd(qpos, qvel, act, action, data0, key, window, branches, traced):
            me = self.at_traced(traced)
            out, (aux, (start, active, rolled)) = me._branching_primal(
                qpos, qvel, act, action, data0, key, window, branches
            )
            data0 = data0.replace(qpos=qpos, qvel=qvel, act=act)
            ref = Configuration(out[0], out[1], out[2])
            return (out, aux), (data0, action, key, aux[1], start, active, branches, rolled, ref, out[3].valid, traced)

        def bwd(res, cotangent):
            data0, action, key, contact, start, active, branches, rolled, ref, kept, traced = res
            me = self.at_traced(traced)
            (g_qpos, g_qvel, g_act, g_carried), _ = cotangent
            g_state = jnp.concatenate([g_qpos, g_qvel, g_act])
            g_kept = jnp.where(kept[:, None], g_carried.z, 0.0)  # a dropped or ended branch is a constant
            g_in, g_u, g_branches = me._branch_backward(
                active, traced, start, data0, action, key, contact, branches, rolled, ref, g_state, g_kept
            )
            nq, nv = int(self.physics.mj_model.nq), self.nv
            return (
                g_in[:nq],
                g_in[nq : nq + nv],
                g_in[nq + nv :],
                g_u,
                None,
                None,
                None,
                Branches(g_branches, None),
                None,
            )

        step = jax.custom_vjp(primal)
        step.defvjp(fwd, bwd)
        return step

    def plain(
        self,
        data0: mjx.Data,
        action: jnp.ndarray,
        key: jax.Array,
        window: jnp.ndarray,
        branches: Branches | None = None,
    ) -> StepResult:
        """The step's values without its derivative rules or branch rollouts: ``__call__``'s
        next state, contact report, ``bundled`` and window, with no branches carried and
        none dropped. It compiles to about one control step where ``__call__`` with branch
        rollouts compiles the branches' step too (twice the XLA program). For callers that
        never differentiate a rollout (the Gymnasium envs). ``bcg`` with ``forward="mean"``
        needs the branches for the next state itself: there it is ``__call__``."""
        if self.branching and self.config.forward == "mean":
            return self(data0, action, key, window, branches)
        data0 = jax.lax.stop_gradient(data0)
        window = jnp.asarray(window, jnp.int32)
        _, next_data, contact, trigger = self._forward(data0, action, key, window)
        if self.branching:
            _, trigger, next_window = self._branch_window(contact, window)
        elif self.estimator.triggered:
            next_window = self._next_window(contact, window)
        else:
            next_window = jnp.zeros((), jnp.int32)
        z = self.empty_branches(data0.qpos.dtype) if branches is None else branches
        stats = {"bundle_dropped": jnp.zeros((), jnp.int32)} if self.branching else {}
        return StepResult(
            data=refresh(self.physics, next_data),
            contact_force=contact.force,
            contact_rise=contact.rise,
            point_force=contact.point_force,
            bundled=trigger,
            bundle_window=next_window,
            stats=stats,
            branches=Branches(jnp.zeros_like(z.z), jnp.zeros_like(z.valid)),
        )

    def __call__(
        self,
        data0: mjx.Data,
        action: jnp.ndarray,
        key: jax.Array,
        window: jnp.ndarray,
        branches: Branches | None = None,
    ) -> StepResult:
        """Step differentiably: gradients flow through ``data0``'s qpos/qvel/act, ``action``
        and the carried ``branches`` (``bcg`` with ``horizon > 1``; ``None``: no running
        rollout); everything else about the step is treated as a constant."""
        aux_in = jax.lax.stop_gradient(data0)
        traced = self.physics.traced
        if branches is None:
            branches = self.empty_branches(data0.qpos.dtype)
        if self.branching and branches.z.shape != (self.num_branches, self.nz):
            raise ValueError(
                f"the state carries {branches.z.shape[0]} bundle branches but this stepper rolls "
                f"{self.num_branches}; make the env with the same estimator and bundle "
                "(make_jax(id, estimator=..., bundle=...))"
            )
        if self.branching:
            (qpos, qvel, act, carried), aux = self._branch_step(
                data0.qpos, data0.qvel, data0.act, action, aux_in, key, window, branches, traced
            )
            next_data, contact, trigger, next_window, dropped = aux
            next_data, contact, trigger = jax.lax.stop_gradient((next_data, contact, trigger))
            stats = {"bundle_dropped": dropped}
        else:
            (qpos, qvel, act), aux = self._vjp_step(
                data0.qpos, data0.qvel, data0.act, action, aux_in, key, window, traced
            )
            next_data, contact, trigger = jax.lax.stop_gradient(aux)
            next_window = self._next_window(contact, window) if self.estimator.triggered else jnp.zeros((), jnp.int32)
            carried, stats = Branches(jnp.zeros_like(branches.z), jnp.zeros_like(branches.valid)), {}
        next_data = refresh(self.physics, next_data.replace(qpos=qpos, qvel=qvel, act=act))
        return StepResult(
            data=next_data,
            contact_force=contact.force,
            contact_rise=contact.rise,
            point_force=contact.point_force,
            bundled=trigger,
            bundle_window=next_window,
            stats=stats,
            branches=carried,
        )


def bcg_chunk(num_envs: int) -> int:
    """Envs bundled per pass when ``bcg`` runs batched: one eighth of the batch (at least
    one), so that a few triggered envs cost a few bundles, not ``num_envs``."""
    return max(1, -(-num_envs // 8))


def triggered_bundle(exact_fn: Callable, bundle_fn: Callable) -> Callable:
    """``fn(trigger, *args)``: ``bundle_fn(*args)`` where ``trigger``, else ``exact_fn(*args)``.

    Its ``vmap`` rule avoids what a plain ``vmap`` of the ``lax.cond`` would do (evaluate
    the bundle for every env at every step): every env gets ``exact_fn``, and the
    triggered envs ``bundle_fn``, ``bcg_chunk(batch)`` envs per pass (at most eight passes
    when every env triggered). One bundle program of one batch size keeps the compile
    small. Used for the Jacobians of ``grad_step`` and the VJPs of the backward pass.

    Unbatched it is a ``lax.cond``, except where JAX's MLIR thread pool has one thread (JAX
    imported in a process that could use one CPU): there XLA mis-converts the ``lax.cond``
    form of the bcg VJP, whose LAPACK calls then fail to run, so the unbatched call runs the
    batched rule on a batch of one, which converts correctly and is several times slower
    (docs/performance.md, "Processes restricted to one CPU").
    """

    def single(trigger, *args):
        if mlir_single_threaded():
            unbatched = [jax.tree.map(lambda _: False, a) for a in (trigger,) + args]
            out, _ = batched(1, unbatched, trigger, *args)
            return jax.tree.map(lambda x: x[0], out)
        return jax.lax.cond(trigger, lambda: bundle_fn(*args), lambda: exact_fn(*args))

    fn = jax.custom_batching.custom_vmap(single)

    @fn.def_vmap
    def batched(axis_size, in_batched, trigger, *args):
        trigger = _broadcast(trigger, in_batched[0], axis_size)
        args = tuple(_broadcast(a, b, axis_size) for a, b in zip(args, in_batched[1:]))
        exact = jax.vmap(exact_fn)(*args)
        chunk = bcg_chunk(axis_size)
        count = jnp.sum(trigger)
        order = jnp.argsort(jnp.logical_not(trigger), stable=True)  # triggered envs first

        def bundle_chunk(c, out):
            pos = c * chunk + jnp.arange(chunk)
            idx = order[jnp.minimum(pos, axis_size - 1)]
            sub = jax.tree.map(lambda x: x[idx], args)
            new = jax.vmap(bundle_fn)(*sub)
            dest = jnp.where(pos < count, idx, axis_size)  # out of range: dropped
            return jax.tree.map(lambda o, n: o.at[dest].set(n, mode="drop"), out, new)

        out = jax.lax.fori_loop(0, (count + chunk - 1) // chunk, bundle_chunk, exact)
        return out, jax.tree.map(lambda _: True, out)

    return fn


def _broadcast(tree, batched, size: int):
    """``tree`` with every unbatched leaf (``batched`` is a matching tree of bools) given
    a leading axis of ``size``."""
    return jax.tree.map(lambda x, b: x if b else jnp.broadcast_to(x, (size,) + jnp.shape(x)), tree, batched)


class _AutodiffJacobians:
    """``StepDerivatives`` of one step as full ``(A, B, stats)``, by forward-mode autodiff
    of ``step``'s transition from ``data0`` (``next_data``: the reference next state)."""

    def __init__(self, step: DifferentiableStep, data0, action, key, contact, next_data):
        self.step, self.data0, self.action, self.key, self.contact = step, data0, action, key, contact
        self.next_data = next_data

    def _bundle(self):
        """``(f, dx, du)``: the transition and the estimator's branch offsets."""
        step = self.step
        f = step.transition(self.data0, self.action, self.next_data)
        dx, du = step.offsets(self.data0, self.action, self.key, self.contact)
        return f, dx, du

    def exact(self):
        return self.step._exact_jacobians(self.data0, self.action, self.key, self.contact, self.next_data)

    def first_order(self):
        return _drop_mean(estimators.first_order_bundle(*self._bundle()))

    def zeroth_order(self):
        return estimators.zeroth_order_bundle(*self._bundle(), self.step._sigma())

    def alpha_order(self):
        cfg = self.step.config
        return estimators.alpha_order_bundle(
            *self._bundle(), self.step._sigma(), tolerance=cfg.alpha_tolerance, bound=cfg.alpha_bound
        )


class _AutodiffVJPs:
    """``StepDerivatives`` of one step as ``(A^T g_y, B^T g_y)``, by reverse mode where the
    estimator is first order; least-squares fits form ``(A, B)`` (what they are) and apply
    their transposes. ``args``: ``(data0, action, key, contact, ref_next, g_y)``."""

    def __init__(self, step: DifferentiableStep, args: tuple):
        self.step, self.args = step, args

    def exact(self):
        return self.step._exact_vjp(*self.args)

    def first_order(self):
        return self.step._bundle_vjp(*self.args)

    def _fitted(self):
        *inputs, g_y = self.args
        A, B, _ = self.step._jacobians(*inputs)
        return A.T @ g_y, B.T @ g_y

    zeroth_order = alpha_order = _fitted


def _drop_mean(result):
    A, B, stats = result
    stats = {k: v for k, v in stats.items() if k != "mean_offset"}
    return A, B, stats
