"""Finite-difference Jacobians of the control step in C, the estimators on top of them,
and the stepper shared by the single and vector envs."""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional, Tuple

import mujoco
import numpy as np

from bcg_envs.envs.base import Jacobians
from bcg_envs.gradients.config import BundleConfig, samples_for
from bcg_envs.gradients.estimators import alpha_order_combine
from bcg_envs.gradients.perturbations import (
    chain_offsets,
    contact_chain,
    draw_size,
    floating_base_dofs,
    global_sigma,
    sampled_contacts,
)
from bcg_envs.gradients.registry import Estimator, resolve
from bcg_envs.gradients.trigger import bundle_decision_scalar
from bcg_envs.mujoco_backend.contact_log import ContactLog
from bcg_envs.mujoco_backend.simulation import FULL_STATE, EnvCore, TaskModel

#: Step of the central differences of the control step (tangent coordinates, action).
FD_EPS = 1e-6
#: Step of the central differences of the C kinematics behind r_x and C.
KIN_FD_EPS = 1e-6


# ======================================================================================
# Finite-difference Jacobians
# ======================================================================================
class Transition:
    """``f(dx, du)`` of one control step from a saved state, batched through ``Rollout``:
    the tangent offset of the next state from ``ref`` (the nominal next state)."""

    def __init__(
        self, shared: TaskModel, state: np.ndarray, warmstart: np.ndarray, action: np.ndarray, ref: np.ndarray
    ):
        self.s = shared
        self.state, self.warmstart, self.action = state, warmstart, action
        self.qpos, self.qvel, self.act = (x.copy() for x in shared.state_parts(state))
        self.ref = ref  # (nq + nv + na) of the reference next state
        self.t_end = state[0] + shared.n_substeps * shared.model.opt.timestep
        self.evaluations = 0

    def __call__(self, dx: np.ndarray, du: np.ndarray) -> np.ndarray:
        """Offsets (k, nx); rows of diverged branches are NaN."""
        s = self.s
        nv, nq = s.nv, s.nq
        dx, du = np.atleast_2d(dx), np.atleast_2d(du)
        k = dx.shape[0]
        states = np.tile(self.state, (k, 1))
        q, v, a = s.state_parts(states)
        q[:] = s.tangent.integrate(self.qpos, dx[:, :nv])
        v[:] = self.qvel[None, :] + dx[:, nv : 2 * nv]
        if s.na:
            a[:] = self.act[None, :] + dx[:, 2 * nv :]
        ctrl = s.action_map(self.action[None, :] + du)
        out = s.run_rollout(states, ctrl, self.warmstart)[:, -1]
        self.evaluations += k
        q1, v1, a1 = s.state_parts(out)
        ref_q, ref_v, ref_a = self.ref[:nq], self.ref[nq : nq + nv], self.ref[nq + nv :]
        y = np.concatenate([s.tangent.difference(q1, ref_q), v1 - ref_v, a1 - ref_a], axis=1)
        bad = (np.abs(out[:, 0] - self.t_end) > 0.5 * s.model.opt.timestep) | ~np.all(np.isfinite(y), axis=1)
        y[bad] = np.nan
        return y

    def jacobians_at(self, dx: np.ndarray, du: np.ndarray, eps: float = FD_EPS):
        """Central-difference (A, B) at each of the k points (dx_i, du_i): (k, nx, nx), (k, nx, nu)."""
        s = self.s
        nx, nu = s.nx, s.nu
        dx, du = np.atleast_2d(dx), np.atleast_2d(du)
        k, n = dx.shape[0], nx + nu
        E = eps * np.eye(n)
        pert = np.concatenate([E, -E])  # (2n, n)
        X = (np.concatenate([dx, du], 1)[:, None, :] + pert[None]).reshape(-1, n)
        Y = self(X[:, :nx], X[:, nx:]).reshape(k, 2, n, nx)
        J = (Y[:, 0] - Y[:, 1]) / (2 * eps)  # (k, n, nx): row j = d y / d input j
        J = np.swapaxes(J, 1, 2)
        return J[:, :, :nx], J[:, :, nx:]


def _finite(*arrays) -> np.ndarray:
    ok = None
    for a in arrays:
        r = np.all(np.isfinite(a.reshape(a.shape[0], -1)), axis=1)
        ok = r if ok is None else ok & r
    return ok


def _masked_mean(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    if not np.any(valid):
        return np.zeros(values.shape[1:])
    return values[valid].mean(axis=0)


def _least_squares(w, dy, valid, scale):
    if not np.any(valid):
        return np.zeros((dy.shape[1], w.shape[1]))
    sol, *_ = np.linalg.lstsq(w[valid] / scale, dy[valid], rcond=None)
    return (sol / scale[:, None]).T


def _sample(rng: np.random.Generator, draw: Callable[[], Tuple[np.ndarray, np.ndarray]], cfg: BundleConfig):
    """``cfg.num_samples`` offsets (resolved by ``Stepper.config``), +/- pairs if antithetic."""
    n = cfg.num_samples // 2 if cfg.antithetic else cfg.num_samples
    pairs = [draw() for _ in range(n)]
    dx = np.stack([p[0] for p in pairs])
    du = np.stack([p[1] for p in pairs])
    if cfg.antithetic:
        dx, du = np.concatenate([dx, -dx]), np.concatenate([du, -du])
    return dx, du


def _contact_sampler(core: EnvCore, log: ContactLog, cfg: BundleConfig, rng: np.random.Generator):
    """Contact-local offsets (``bcg_envs.gradients.perturbations.contact_chain`` and
    ``chain_offsets`` in NumPy) with the contact Jacobian from ``mj_jac`` at the step's
    start state; normals from ``rng`` in the order dp, dv, du."""
    s = core.s
    m, d0 = s.model, core.prev_data
    contacts = list(log.best.values())
    events = log.pressing(cfg)
    mask = sampled_contacts([c[3] in events for c in contacts], [c[0] for c in contacts], xp=np)
    active = [c for c, on in zip(contacts, mask) if on]
    rows = []
    jp1, jp2 = np.zeros((3, s.nv)), np.zeros((3, s.nv))
    for force, point, (g1, g2), _ in active:
        mujoco.mj_jac(m, d0, jp1, None, point, int(s.body_of_geom[g1]))
        mujoco.mj_jac(m, d0, jp2, None, point, int(s.body_of_geom[g2]))
        rows.append(jp1 - jp2)
    J = np.concatenate(rows) if rows else np.zeros((0, s.nv))
    chain = contact_chain(J, cfg.damping, None if cfg.perturb_base else ~floating_base_dofs(m))
    size = draw_size(cfg.space, chain)

    def draw():
        dx = np.zeros(s.nx)
        z_pos, z_vel = rng.standard_normal(size), rng.standard_normal(size)
        dx[: s.nv], dx[s.nv : 2 * s.nv] = chain_offsets(chain, cfg.space, cfg.state_sigma, z_pos, z_vel)
        return dx, cfg.action_sigma * rng.standard_normal(s.nu)

    return draw


def _draw(core: EnvCore, estimator: Estimator, cfg: BundleConfig, log: ContactLog, rng: np.random.Generator):
    """The estimator's offset sampler: contact-local, or global with its widths."""
    s = core.s
    if estimator.contact_local:
        return _contact_sampler(core, log, cfg, rng)
    sigma = global_sigma(s.nv, s.na, s.nu, cfg, zeroth=estimator.least_squares)
    return lambda: (lambda w: (w[: s.nx], w[s.nx :]))(sigma * rng.standard_normal(s.nx + s.nu))


class _FiniteDifferences:
    """``StepDerivatives`` of one step as ``(A, B, bundle_dropped, alpha)``, from central
    differences of ``f`` in MuJoCo C (``DifferentiableStep._jacobians``' counterpart)."""

    def __init__(
        self,
        core: EnvCore,
        f: Transition,
        estimator: Estimator,
        cfg: BundleConfig,
        log: ContactLog,
        rng: np.random.Generator,
    ):
        self.core, self.f, self.estimator, self.cfg, self.log, self.rng = core, f, estimator, cfg, log, rng

    def _samples(self):
        return _sample(self.rng, _draw(self.core, self.estimator, self.cfg, self.log, self.rng), self.cfg)

    def exact(self):
        s = self.core.s
        nx, nu = s.nx, s.nu
        A, B = self.f.jacobians_at(np.zeros((1, nx)), np.zeros((1, nu)))
        ok = bool(_finite(A, B)[0])
        dropped = 0 if ok else (self.cfg.num_samples if self.estimator.samples else 1)
        return (A[0] if ok else np.zeros((nx, nx))), (B[0] if ok else np.zeros((nx, nu))), dropped, 1.0

    def first_order(self):
        dx, du = self._samples()
        A_i, B_i = self.f.jacobians_at(dx, du)
        valid = _finite(A_i, B_i)
        return _masked_mean(A_i, valid), _masked_mean(B_i, valid), int(dx.shape[0] - valid.sum()), 1.0

    def _forward_differences(self):
        """``(dx, du, w, dy, valid)``: the samples and their forward differences from the nominal."""
        s = self.core.s
        zx, zu = np.zeros((1, s.nx)), np.zeros((1, s.nu))
        dx, du = self._samples()
        Y = self.f(np.concatenate([zx, dx]), np.concatenate([zu, du]))
        dy = Y[1:] - Y[:1]
        return dx, du, np.concatenate([dx, du], 1), dy, _finite(dy)

    def zeroth_order(self):
        s, cfg = self.core.s, self.cfg
        dx, du, w, dy, valid = self._forward_differences()
        sigma = np.maximum(global_sigma(s.nv, s.na, s.nu, cfg, zeroth=True), 1e-12)
        zeroth = _least_squares(w, np.where(valid[:, None], dy, 0.0), valid, sigma)
        return zeroth[:, : s.nx], zeroth[:, s.nx :], int(dx.shape[0] - valid.sum()), 0.0

    def alpha_order(self):
        # AoBG (Suh et al. 2022), the JAX backend's estimator (inverse-variance weight of
        # first order and the least-squares fit, then the robustness check with the bound
        # cfg.alpha_tolerance of kind cfg.alpha_bound).
        s, cfg = self.core.s, self.cfg
        dx, du, w, dy, valid = self._forward_differences()
        A_i, B_i = self.f.jacobians_at(dx, du)
        valid = valid & _finite(A_i, B_i)
        AB, alpha = alpha_order_combine(
            np.concatenate([A_i, B_i], axis=2),
            valid,
            w,
            dy,
            global_sigma(s.nv, s.na, s.nu, cfg, zeroth=True),
            cfg.alpha_tolerance,
            cfg.alpha_bound,
        )
        AB = np.asarray(AB)
        return AB[:, : s.nx], AB[:, s.nx :], int(dx.shape[0] - valid.sum()), float(np.asarray(alpha))


def _estimate(
    core: EnvCore,
    f: Transition,
    estimator: Estimator,
    cfg: BundleConfig,
    log: ContactLog,
    trigger: bool,
    rng: np.random.Generator,
):
    """(A, B, bundle_dropped, alpha) of one step, as ``DifferentiableStep._jacobians``: a
    triggered estimator's exact derivative where its trigger is off, else its bundle's."""
    ops = _FiniteDifferences(core, f, estimator, cfg, log, rng)
    if estimator.triggered and not trigger:
        return ops.exact()
    return estimator.bundled(ops)


# ======================================================================================
# Stepping (shared by the single and vector envs)
# ======================================================================================
def _physics(core: EnvCore, action: np.ndarray, estimator: Estimator, cfg: BundleConfig, rolled=None, keep_start=False):
    """Advance ``core.d`` by one control step (MuJoCo C), not yet refreshed or reverted.

    Returns (clipped action, physics action (``MjxEnv.physics_action`` of the clipped
    one), contact log, trigger, next bundle window, diverged, (start state, start
    warmstart) or (None, None)).
    """
    s = core.s
    clipped = np.minimum(np.maximum(action, -1.0), 1.0).astype(np.float32)
    u = s.physics_action(clipped, core.info)
    ctrl = s.action_map(u)
    core.begin()
    start = warm = None
    if keep_start or rolled is not None:
        start = np.zeros(s.nstate)
        mujoco.mj_getState(s.model, core.d, start, FULL_STATE)
        warm = core.d.qacc_warmstart.copy()
    if rolled is None:
        log = core.substeps(ctrl)
        time_ok = True
    else:
        log = core.replay(ctrl, rolled, start, warm)
        time_ok = abs(rolled[-1, 0] - (start[0] + s.n_substeps * s.model.opt.timestep)) < 0.5 * s.model.opt.timestep
    trig, window = core.trigger(estimator, cfg, log)
    diverged = core.diverged(time_ok)
    return clipped, u, log, trig, window, diverged, (start, warm)


def _mean_forward(core: EnvCore, f: Transition, estimator: Estimator, cfg: BundleConfig, log: ContactLog, rng) -> None:
    """``BundleConfig.forward == "mean"``: move the next state by the mean branch offset."""
    s = core.s
    dx, du = _sample(rng, _draw(core, estimator, cfg, log, rng), cfg)
    y = f(dx, du)
    ok = _finite(y)
    if not np.any(ok):
        return
    mean = y[ok].mean(0)
    d = core.d
    q = s.tangent.integrate(d.qpos.copy(), mean[: s.nv])[0]
    d.qpos[:] = q
    d.qvel[:] = d.qvel + mean[s.nv : 2 * s.nv]
    if s.na:
        d.act[:] = d.act + mean[2 * s.nv :]


class Stepper:
    """``step``/``grad_step`` of one core (the single env, and the vector env's grad_step)."""

    def __init__(self, shared: TaskModel):
        self.s = shared
        self.default_estimator = resolve(shared.spec.estimator)
        self.default_bundle = shared.spec.bundle
        self._configs: Dict[Tuple[Optional[BundleConfig], str], BundleConfig] = {}
        # The plain step's estimator and config, and its memoized trigger decisions
        # ((pressing, window) -> (bundles, next window)): hashing the estimator and config
        # per step costs ~2 us.
        self._est = self.default_estimator
        self._cfg = self.config(None, self._est)
        self._mean = self._cfg.forward == "mean" and self._est.samples
        #: Whether ``step`` takes ``EnvCore.plain_step`` (identity physics action, affine
        #: map, public leaves only, no mean forward).
        self.fused = (
            shared.physics_action.identity and shared.action_map.affine and shared.program.all_public and not self._mean
        )
        self._decisions: Dict[Tuple[bool, int], Tuple[bool, int]] = {}

    def config(self, bundle: Optional[BundleConfig], estimator: Estimator) -> BundleConfig:
        """``bundle`` (or the env's) with the env's force threshold and the estimator's
        branch count filled in."""
        if bundle is not None and not isinstance(bundle, BundleConfig):
            raise ValueError(f"bundle must be a BundleConfig or None, got {type(bundle).__name__}")
        key = (bundle, estimator)
        if key not in self._configs:
            cfg = (bundle or self.default_bundle).with_defaults(self.s.spec.default_force_threshold)
            n = samples_for(cfg, estimator, self.s.nx, self.s.nu)
            self._configs[key] = dataclasses.replace(cfg, num_samples=n, allow_underdetermined=True)
        return self._configs[key]

    def rng(self, core: EnvCore, cfg: BundleConfig) -> np.random.Generator:
        """The step's perturbation generator: seeded by ``BundleConfig.seed``, the episode
        (drawn from the env's seed at reset) and the step count."""
        return np.random.default_rng([cfg.seed, core.episode, int(core.info["step"])])

    def _decide(self, pressing: bool, window: int) -> Tuple[bool, int]:
        """The plain step's trigger decision (``bundle_decision_scalar``), memoized here."""
        key = (pressing, window)
        out = self._decisions.get(key)
        if out is None:
            out = self._decisions[key] = bundle_decision_scalar(self._est, pressing, int(window), self._cfg.horizon)
        return out

    def step(self, core: EnvCore, action: np.ndarray):
        """(obs, reward, terminated, truncated, info) of one step of ``core`` (no
        Jacobians); ``info`` is a fresh dict (``EnvCore.info_dict``)."""
        if self.fused:
            return core.plain_step(action, self)
        est = self._est
        cfg = self._cfg
        mean = self._mean
        clipped, u, log, trig, window, diverged, (start, warm) = _physics(core, action, est, cfg, keep_start=mean)
        if mean and trig and not diverged:
            self.mean_forward(core, start, warm, u, est, cfg, log, self.rng(core, cfg))
        prev = core.finish(diverged, log, trig, window, clipped)
        out = core.evaluate(prev, clipped, core.leaves, core.info)
        return (*core.outputs(out), core.info_dict())

    def mean_forward(
        self,
        core: EnvCore,
        start: np.ndarray,
        warm: np.ndarray,
        u: np.ndarray,
        est: Estimator,
        cfg: BundleConfig,
        log: ContactLog,
        rng: np.random.Generator,
    ) -> None:
        """``forward="mean"``: branches from the step's start under the physics action ``u``."""
        s = self.s
        ref = np.concatenate([core.d.qpos, core.d.qvel, core.d.act])
        f = Transition(s, start, warm, u.astype(np.float64), ref)
        self._load_prev(core, start, warm)
        _mean_forward(core, f, est, cfg, log, rng)

    def _load_prev(self, core: EnvCore, start, warm) -> None:
        """``core.prev_data``: the step's start state with kinematics (for contact Jacobians)."""
        m, d0 = self.s.model, core.prev_data
        mujoco.mj_setState(m, d0, start, FULL_STATE)
        mujoco.mj_kinematics(m, d0)
        mujoco.mj_comPos(m, d0)

    def grad_step(
        self, core: EnvCore, action: np.ndarray, estimator: Optional[Estimator], bundle: Optional[BundleConfig]
    ):
        """``(outputs, Jacobians)`` of one step of ``core`` by ``estimator`` (None: the env's),
        an ``Estimator`` resolved by the caller (``GymEnv.grad_step``)."""
        s = self.s
        est = estimator or self.default_estimator
        cfg = self.config(bundle, est)
        rng = self.rng(core, cfg)
        action = np.asarray(action, np.float32)
        mujoco.mj_copyData(core.prev_data, s.model, core.d)  # start state, refreshed kinematics
        prev_snapshot = core.prev_data
        info_before = dict(core.info)
        clipped, u, log, trig, window, diverged, (start, warm) = _physics(core, action, est, cfg, keep_start=True)
        nx, nu = s.nx, s.nu
        if diverged:
            prev = core.finish(True, log, trig, window, clipped)
            out = core.evaluate(prev, clipped, core.leaves, core.info)
            res = core.outputs(out)
            jac = Jacobians(
                np.zeros((nx, nx)), np.zeros((nx, nu)), np.zeros(nx), np.zeros(nu), np.zeros((s.program.nobs, nx))
            )
            core.info["bundle_dropped"] = 0
            core.info["bundle_alpha"] = 1.0
            return res, jac
        ref = np.concatenate([core.d.qpos, core.d.qvel, core.d.act])
        f = Transition(s, start, warm, u.astype(np.float64), ref)
        if cfg.forward == "mean" and est.samples and trig:
            # The same branches as the Jacobians below (a generator with the same seed).
            _mean_forward(core, f, est, cfg, log, self.rng(core, cfg))
        A, B, dropped, alpha = _estimate(core, f, est, cfg, log, trig, rng)
        B = B @ s.physics_action.jacobian(clipped, info_before)  # d x'/d a = d x'/d u  d u/d a
        in_box = (np.abs(action) <= 1.0).astype(np.float64)
        B = B * in_box[None, :]
        prev = core.finish(False, log, trig, window, clipped)
        out = core.evaluate(prev, clipped, core.leaves, core.info)
        result = core.outputs(out)
        r_x, r_a, C = self._task_jacobians(core, prev_snapshot, action, A, B)
        core.info["bundle_dropped"] = int(dropped)
        core.info["bundle_alpha"] = float(np.float32(alpha))
        jac = Jacobians(A, B, r_x, r_a, C)
        return result, jac

    def _task_jacobians(self, core: EnvCore, d0: mujoco.MjData, action: np.ndarray, A, B):
        """r_x = g0 + A^T g1, r_a = ga + B^T g1 and C = d obs / d x1 (as ``MjxEnv.grad_step``).

        The task functions see a state only through the ``mjx.Data`` leaves they read, so
        each derivative is (d task / d leaves) (d leaves / d x): the first by forward-mode
        autodiff of the shared (float32) task functions at the packed inputs, the second
        by central differences (float64) of MuJoCo C's kinematics at the start state
        ``d0`` and the end state. Central differences of the float32 task functions
        themselves would need steps ~1e-3 to stay above rounding noise.
        """
        s = self.s
        p = s.program
        m = s.model
        nx, nv = s.nx, s.nv
        eps = KIN_FD_EPS
        info = dict(core.info)
        info["truncated"] = info["step"] >= s.episode_length
        prev0 = p.read(d0)
        next0 = core.leaves

        def leaf_jacobian(base: mujoco.MjData, which: str) -> np.ndarray:
            """d fvec / d x (nf, nx) through the leaves of ``which`` ("prev" / "data")."""
            scratch = core.scratch_data
            mujoco.mj_copyData(scratch, m, base)
            q0, v0, a0 = base.qpos.copy(), base.qvel.copy(), base.act.copy()
            cols = []
            for sign in (1.0, -1.0):
                rows = []
                for j in range(nx):
                    dx = np.zeros(nx)
                    dx[j] = sign * eps
                    scratch.qpos[:] = s.tangent.integrate(q0, dx[:nv])[0]
                    scratch.qvel[:] = v0 + dx[nv : 2 * nv]
                    if s.na:
                        scratch.act[:] = a0 + dx[2 * nv :]
                    mujoco.mj_kinematics(m, scratch)
                    mujoco.mj_comPos(m, scratch)
                    leaves = p.read(scratch)
                    args = (leaves, action, next0) if which == "prev" else (prev0, action, leaves)
                    rows.append(p.pack(args[0], args[1], args[2], info, np.float64)[0])
                cols.append(np.stack(rows, axis=1))
            return (cols[0] - cols[1]) / (2 * eps)

        fvec, ivec = p.pack(prev0, action, next0, info)
        J = p.jacobian(fvec, ivec)  # (nout, nf)
        dr, dobs = J[p.nobs], J[: p.nobs]
        F0 = leaf_jacobian(d0, "prev")
        F1 = leaf_jacobian(core.d, "data")
        g0 = dr @ F0
        g1 = dr @ F1
        ga = dr[p.span("action")]
        C = dobs @ F1
        return g0 + A.T @ g1, ga + B.T @ g1, C
