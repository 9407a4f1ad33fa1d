"""CPU fast path: ``backend="mujoco"`` steps the task's ``MjModel`` in MuJoCo C.

A jitted MJX step on CPU is dispatch-bound (hundreds of microseconds per call) while
MuJoCo C steps the same small model in microseconds. ``MujocoGymEnv`` and
``MujocoVectorEnv`` keep the task's JAX logic (observation, reward, termination, initial
states, action map; written once, in the task class) and replace only the physics:

* Physics: ``mujoco.mj_step`` on ``jax_env.mj_model`` (the model MJX simulates, contact
  stiffness and task edits applied), ``physics.n_substeps`` substeps per control step, in
  float64, ``ctrl = action_to_ctrl(clip(action))`` in NumPy (as ``c + M a`` when the map is
  affine, checked at construction). The contact normal forces behind
  ``info["max_contact_force"]`` and the ``bcg`` trigger are MuJoCo's own
  (``mj_contactForce``), the largest over the substeps.
* Task logic: ``observe``/``reward``/``terminated`` are traced once into one jitted
  function of a packed vector holding exactly the ``mjx.Data`` leaves (and task-info
  entries) that they read, found by a liveness pass over the traced jaxpr; every other
  leaf is a zero constant that XLA removes. The leaves are copied from the C ``MjData``
  after ``mj_kinematics``/``mj_comPos`` (MJX's ``refresh``); contact and constraint leaves
  are reordered into MJX's slot layout exactly as ``mjx.put_data`` does, and leaves
  without a fast copy would fall back to ``mjx.put_data`` per step. ``mjx.put_data``
  costs 3-9 ms per call on BoxPush, the packed path ~7 us plus one ~12 us jit dispatch
  (``benchmark()``).
* Vector env: all copies advance in one multi-threaded ``mujoco.rollout.Rollout`` call;
  rollout returns states only, so each copy then replays ``mj_forward`` at the substeps
  where ``mj_collision`` finds contacts (and at the last one) for the contact forces, the
  constraint leaves and the next warmstart. One vmapped jit call evaluates the task.
* Jacobians (``grad_step``): central differences of the whole control step in tangent
  coordinates (``mj_integratePos``/``mj_differentiatePos``); every branch of an
  estimator is one trajectory of a single ``Rollout`` call. (``mjd_transitionFD`` per
  substep, composed, agrees to ~1e-8 at smooth states and costs about the same for
  ``exact``, but the bundles would need a Python loop over branches and substeps.)
  ``r_x``, ``r_a`` and ``C`` chain forward-mode derivatives of the shared task functions
  with respect to the leaves they read with central differences of C's kinematics.

Divergence (non-finite state, a MuJoCo instability warning, or ``|qvel| >= 1e3``) reverts
the step as in MJX: ``terminated=True``, ``info["sim_diverged"]=True``, finite obs, zero
Jacobians.

``python -m bcg_envs.mujoco_backend`` runs ``benchmark()``.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import gymnasium
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space
from mujoco import mjx
from mujoco import rollout as mj_rollout

from bcg_envs.envs.base import MAX_QVEL, Jacobians, MjxEnv
from bcg_envs.gradients.config import BundleConfig, check_estimator
from bcg_envs.gym import OBS_BOUND, GradStepResult, _check_vector, check_action, render_state
from bcg_envs.registry import make_jax

#: Step of the central differences of the control step (tangent coordinates, action).
FD_EPS = 1e-6
#: Step of the central differences of the C kinematics behind r_x and C.
KIN_FD_EPS = 1e-6

_FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS
_INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION
_BAD = sorted(int(w) for w in (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL))
assert _BAD == list(range(_BAD[0], _BAD[0] + 3))
_BAD_SLICE = slice(_BAD[0], _BAD[0] + 3)
#: 1-D constraint arrays that ``mjx.put_data`` reorders into MJX's efc layout.
_EFC_1D = ("efc_pos", "efc_margin", "efc_frictionloss", "efc_D", "efc_aref", "efc_force")


def _default_threads() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        n = os.cpu_count() or 1
    return 0 if n <= 1 else min(n, 8)


# ======================================================================================
# Task logic: the JAX functions, compiled once over the leaves they read
# ======================================================================================
def _live_inputs(jaxpr) -> List[bool]:
    """Which inputs of ``jaxpr`` reach an output (conservative through sub-jaxprs)."""
    from jax.extend.core import Var

    live = {v for v in jaxpr.outvars if isinstance(v, Var)}
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any(v in live for v in eqn.outvars):
            live.update(v for v in eqn.invars if isinstance(v, Var))
    return [v in live for v in jaxpr.invars]


class _Leaf:
    """One input leaf of the task program and how to read it from a C ``MjData``."""

    def __init__(self, path: str, shape: tuple, dtype, kind: str, source=None):
        self.path, self.shape, self.dtype, self.kind, self.source = path, shape, np.dtype(dtype), kind, source
        self.size = int(np.prod(shape, dtype=np.int64))
        self.integer = not np.issubdtype(self.dtype, np.floating)


class _ContactLayout:
    """``mjx.put_data``'s placement of C contacts and constraint rows into MJX slots."""

    def __init__(self, model: mujoco.MjModel):
        from mujoco.mjx._src import collision_driver, constraint, types

        dim = collision_driver.make_condim(model, impl=types.Impl.JAX)
        efc_type = constraint.make_efc_type(model, dim)
        self.efc_address = np.asarray(constraint.make_efc_address(model, dim, efc_type))
        self.ne, self.nf, self.nl, self.nc = constraint.counts(efc_type)
        self.nefc = self.ne + self.nf + self.nl + self.nc
        self.dim = np.asarray(dim)
        self.slots = {int(v): np.flatnonzero(self.dim == v) for v in np.unique(self.dim)}
        self.pyramidal = model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL

    def contact_map(self, d: mujoco.MjData) -> np.ndarray:
        """slot -> C contact index (-1: empty), as ``mjx._src.io._put_contact``."""
        cmap = -np.ones(self.dim.size, np.int64)
        if d.ncon:
            cdim = d.contact.dim[: d.ncon]
            for v, slots in self.slots.items():
                idx = np.flatnonzero(cdim == v)
                if idx.size > slots.size:
                    raise ValueError(f"unable to place {idx.size} contacts of condim {v} in {slots.size} MJX slots")
                cmap[slots[: idx.size]] = idx
            if np.sum(cmap >= 0) != d.ncon:
                raise ValueError("contact of a condim MJX does not allocate")
        return cmap

    def contact_field(self, d: mujoco.MjData, name: str, shape, cmap) -> np.ndarray:
        if name == "dim":
            return self.dim.reshape(shape)
        if name == "efc_address":
            return self.efc_address.reshape(shape)
        out = np.zeros(shape)
        if name == "dist":
            out[:] = 1e10
        on = cmap >= 0
        if np.any(on):
            src = np.asarray(getattr(d.contact, name))[cmap[on]]
            out[on] = src.reshape((-1,) + tuple(shape[1:]))
        return out

    def efc_field(self, d: mujoco.MjData, name: str, cmap) -> np.ndarray:
        src = np.asarray(getattr(d, name))
        out = np.zeros(self.nefc)
        dst_beg, src_beg = 0, 0
        for size_mjx, size_c in ((self.ne, d.ne), (self.nf, d.nf), (self.nl, d.nl)):
            out[dst_beg : dst_beg + size_c] = src[src_beg : src_beg + size_c]
            dst_beg, src_beg = dst_beg + size_mjx, src_beg + size_c
        if d.ncon:
            c_adr = d.contact.efc_address
            for slot, ci in enumerate(cmap):
                if ci < 0 or c_adr[ci] < 0:
                    continue
                rows = int(self.dim[slot])
                if rows > 1 and self.pyramidal:
                    rows = 2 * (rows - 1)
                o = self.efc_address[slot]
                out[o : o + rows] = src[c_adr[ci] : c_adr[ci] + rows]
        return out


class _TaskProgram:
    """``(prev, action, data, info) -> (obs, reward, done, weighted terms)``, jitted once.

    Mirrors ``MjxEnv._step`` after the physics: the reward sees ``info`` as given (step
    already advanced) and is zeroed on divergence; ``terminated`` and ``observe`` see
    ``truncated = step >= episode_length``; ``done = diverged | terminated``.
    Inputs travel as one float and one int vector holding only the leaves it reads.
    """

    def __init__(self, jax_env: MjxEnv, model: mujoco.MjModel):
        self.env = jax_env
        self.model = model
        d = mujoco.MjData(model)
        mujoco.mj_forward(model, d)
        template = mjx.put_data(model, d)
        flat, self._treedef = jax.tree_util.tree_flatten_with_path(template)
        self._paths = [jax.tree_util.keystr(p) for p, _ in flat]
        self._avals = [(tuple(x.shape), np.dtype(x.dtype)) for _, x in flat]
        info_spec = jax.eval_shape(jax_env.reset, jax.random.PRNGKey(0)).info
        self.info_keys = [k for k in info_spec if k != "rng"]
        self._info_avals = {k: (tuple(info_spec[k].shape), np.dtype(info_spec[k].dtype)) for k in self.info_keys}
        self.metric_keys = [f"reward/{k}" for k in jax_env.config["reward_weights"]]
        self.nu = int(model.nu)
        self.nobs = int(jax_env.observation_size)

        # Which leaves do the task functions read?
        n = len(self._paths)
        specs = [jax.ShapeDtypeStruct(s, t) for s, t in self._avals]
        info_specs = {k: jax.ShapeDtypeStruct(*self._info_avals[k]) for k in self.info_keys}
        closed = jax.make_jaxpr(self._task)(specs, jax.ShapeDtypeStruct((self.nu,), np.float32), specs, info_specs)
        live = _live_inputs(closed.jaxpr)
        info_order = sorted(self.info_keys)  # dict flattening order
        self.prev_used = [i for i in range(n) if live[i]]
        self.data_used = [i for i in range(n) if live[n + 1 + i]]
        self.info_used = [k for k, on in zip(info_order, live[2 * n + 1 :]) if on]

        self._layout = _ContactLayout(model)
        used = sorted(set(self.prev_used) | set(self.data_used))
        probe = mujoco.MjData(model)
        self.leaves: Dict[int, _Leaf] = {i: self._make_leaf(i, probe) for i in used}
        self.slow = [self.leaves[i].path for i in used if self.leaves[i].kind == "slow"]
        self._needs_cmap = any(self.leaves[i].kind in ("contact", "efc") for i in used)

        # Packed layout: [prev leaves, action, data leaves, info entries], float / int.
        entries = [("prev", i, self.leaves[i].shape, self.leaves[i].integer) for i in self.prev_used]
        entries.append(("action", None, (self.nu,), False))
        entries += [("data", i, self.leaves[i].shape, self.leaves[i].integer) for i in self.data_used]
        for k in self.info_used:
            shape, dtype = self._info_avals[k]
            entries.append(("info", k, shape, not np.issubdtype(dtype, np.floating)))
        self._entries = []
        nf = ni = 0
        for group, key, shape, integer in entries:
            size = int(np.prod(shape, dtype=np.int64))
            if integer:
                self._entries.append((group, key, shape, True, ni, size))
                ni += size
            else:
                self._entries.append((group, key, shape, False, nf, size))
                nf += size
        self.nf, self.ni = nf, ni
        groups = {"prev": 0, "data": 1, "info": 2, "action": 3}
        # flat: entries of more than one axis are raveled when packed
        self._slots = [(groups[g], k, integer, off, off + size, len(shape) > 1) for g, k, shape, integer, off, size in self._entries]
        self.nout = self.nobs + 2 + len(self.metric_keys)
        self._fns: Dict[tuple, Callable] = {}

    # ----- the traced function ------------------------------------------------------------
    def _task(self, prev_leaves, action, data_leaves, info):
        env = self.env
        prev = jax.tree_util.tree_unflatten(self._treedef, prev_leaves)
        data = jax.tree_util.tree_unflatten(self._treedef, data_leaves)
        diverged = info["sim_diverged"]
        action = jnp.clip(action, -1.0, 1.0)
        reward, weighted = env.reward(prev, action, data, info)
        reward = jnp.where(diverged, 0.0, reward)
        info = dict(info)
        info["truncated"] = info["step"] >= env.episode_length
        done = diverged | env.terminated(data, info)
        obs = env.observe(data, info)
        return obs, reward, done, weighted

    def _packed(self, fvec, ivec):
        leaves: Dict[str, Dict[Any, Any]] = {"prev": {}, "data": {}, "info": {}, "action": {}}
        fdt = fvec.dtype
        for group, key, shape, integer, off, size in self._entries:
            src = ivec if integer else fvec
            leaves[group][key] = src[off : off + size].reshape(shape)
        action = leaves["action"][None]

        def rebuild(group):
            out = []
            for i, (shape, dtype) in enumerate(self._avals):
                if i in leaves[group]:
                    out.append(leaves[group][i].astype(dtype if np.issubdtype(dtype, np.integer) or dtype == bool else fdt))
                else:
                    out.append(jnp.zeros(shape, dtype if not np.issubdtype(dtype, np.floating) else fdt))
            return out

        info = {}
        for k in self.info_keys:
            shape, dtype = self._info_avals[k]
            if k in leaves["info"]:
                v = leaves["info"][k]
                info[k] = v.astype(dtype) if not np.issubdtype(dtype, np.floating) else v
            else:
                info[k] = jnp.zeros(shape, dtype if not np.issubdtype(dtype, np.floating) else fdt)
        obs, reward, done, weighted = self._task(rebuild("prev"), action, rebuild("data"), info)
        parts = [jnp.ravel(obs).astype(fdt), jnp.reshape(reward, (1,)).astype(fdt), jnp.reshape(done, (1,)).astype(fdt)]
        parts += [jnp.reshape(weighted[k.split("/", 1)[1]], (1,)).astype(fdt) for k in self.metric_keys]
        return jnp.concatenate(parts)

    def function(self, batched: bool = False):
        """The jitted packed program ``(fvec, ivec) -> out``, optionally vmapped."""
        if batched not in self._fns:
            self._fns[batched] = jax.jit(jax.vmap(self._packed) if batched else self._packed)
        return self._fns[batched]

    def __call__(self, fvec, ivec, batched=False) -> np.ndarray:
        return np.asarray(self.function(batched)(fvec, ivec))

    def jacobian(self, fvec, ivec) -> np.ndarray:
        """d out / d fvec (forward mode through the task functions), (nout, nf)."""
        if "jac" not in self._fns:
            self._fns["jac"] = jax.jit(jax.jacfwd(self._packed))
        return np.asarray(self._fns["jac"](fvec, ivec), np.float64)

    def span(self, group: str, key=None) -> slice:
        """Where an input entry lives in the float vector."""
        for g, k, _, integer, off, size in self._entries:
            if g == group and k == key and not integer:
                return slice(off, off + size)
        return slice(0, 0)

    # ----- reading leaves from MuJoCo C ---------------------------------------------------
    def _make_leaf(self, i: int, probe: mujoco.MjData) -> _Leaf:
        path = self._paths[i]
        shape, dtype = self._avals[i]
        size = int(np.prod(shape, dtype=np.int64))
        parts = path.lstrip(".").split(".")
        if parts[0] != "_impl" and len(parts) == 1 and hasattr(probe, parts[0]):
            if np.asarray(getattr(probe, parts[0])).size == size:
                return _Leaf(path, shape, dtype, "public", parts[0])
        if parts[:2] == ["_impl", "contact"] and len(parts) == 3 and hasattr(probe.contact, parts[2]):
            return _Leaf(path, shape, dtype, "contact", parts[2])
        if len(parts) == 2 and parts[0] == "_impl" and parts[1] in _EFC_1D:
            return _Leaf(path, shape, dtype, "efc", parts[1])
        return _Leaf(path, shape, dtype, "slow", None)

    def read(self, d: mujoco.MjData) -> Dict[int, np.ndarray]:
        """The used leaves of ``d`` (after kinematics), as float64 / int arrays."""
        out: Dict[int, np.ndarray] = {}
        cmap = self._layout.contact_map(d) if self._needs_cmap else None
        slow = None
        for i, leaf in self.leaves.items():
            if leaf.kind == "public":
                v = np.array(getattr(d, leaf.source), dtype=np.float64 if not leaf.integer else np.int64).reshape(leaf.shape)
            elif leaf.kind == "contact":
                v = self._layout.contact_field(d, leaf.source, leaf.shape, cmap)
            elif leaf.kind == "efc":
                v = self._layout.efc_field(d, leaf.source, cmap)
            else:
                if slow is None:
                    slow = jax.tree_util.tree_leaves(mjx.put_data(self.model, d))
                v = np.asarray(slow[i])
            out[i] = v
        return out

    def pack(self, prev: Dict[int, np.ndarray], action, data: Dict[int, np.ndarray], info: Dict[str, Any], fdtype=np.float32):
        """The program's (float, int) input vectors."""
        fvec = np.empty(self.nf, fdtype)
        ivec = np.empty(self.ni, np.int32)
        src = (prev, data, info, {None: action})
        for g, key, integer, lo, hi, flat in self._slots:
            v = src[g][key]
            (ivec if integer else fvec)[lo:hi] = v.reshape(-1) if flat else v
        return fvec, ivec

    def unpack(self, out: np.ndarray):
        """obs (float32), reward, done, weighted terms: Python scalars for one output,
        arrays for a batch."""
        obs = out[..., : self.nobs].astype(np.float32)
        np.minimum(obs, OBS_BOUND, out=obs)
        np.maximum(obs, -OBS_BOUND, out=obs)
        if out.ndim == 1:
            rest = out[self.nobs :].tolist()
            return obs, rest[0], rest[1] > 0.5, dict(zip(self.metric_keys, rest[2:]))
        reward = out[:, self.nobs].astype(np.float32)
        done = out[:, self.nobs + 1] > 0.5
        metrics = {k: out[:, self.nobs + 2 + j].astype(np.float32) for j, k in enumerate(self.metric_keys)}
        return obs, reward, done, metrics


# ======================================================================================
# Action map
# ======================================================================================
class _ActionMap:
    """``action_to_ctrl`` in NumPy: ``c + M a`` when the task's map is affine (checked at
    random points), otherwise the jitted JAX function."""

    def __init__(self, jax_env: MjxEnv, nu: int):
        f = jax.jit(jax_env.action_to_ctrl)
        zero = np.zeros(nu, np.float32)
        c = np.asarray(f(zero), np.float64)
        M = np.asarray(jax.jacfwd(jax_env.action_to_ctrl)(zero), np.float64).reshape(c.size, nu)
        rng = np.random.default_rng(0)
        affine = True
        for _ in range(4):
            a = rng.uniform(-1, 1, nu).astype(np.float32)
            ref = np.asarray(f(a), np.float64)
            if not np.allclose(ref, c + M @ a, rtol=1e-5, atol=1e-6 * (1 + np.abs(ref).max())):
                affine = False
        self.c, self.M, self.affine, self._f = c, M, affine, f

    def __call__(self, action: np.ndarray) -> np.ndarray:
        if self.affine:
            return self.c + np.asarray(action, np.float64) @ self.M.T
        if np.ndim(action) == 2:
            return np.asarray(jax.vmap(self._f)(np.asarray(action, np.float32)), np.float64)
        return np.asarray(self._f(np.asarray(action, np.float32)), np.float64)


# ======================================================================================
# Contacts and tangent coordinates
# ======================================================================================
class _ContactLog:
    """Largest normal force of each contact over a control step's substeps (MuJoCo's
    ``mj_contactForce``), with the contact point and geoms at that substep. Contacts are
    keyed by geom pair and rank within the pair (MJX keys them by collision slot)."""

    __slots__ = ("best", "_buf", "max_force")

    def __init__(self):
        self.best: Dict[tuple, list] = {}
        self._buf = np.zeros(6)
        self.max_force = 0.0

    def record(self, m: mujoco.MjModel, d: mujoco.MjData) -> None:
        n = d.ncon
        if not n:
            return
        con = d.contact
        adr, geom, pos = con.efc_address, con.geom, con.pos
        seen: Dict[tuple, int] = {}
        for i in range(n):
            if adr[i] < 0:
                continue
            pair = (int(geom[i, 0]), int(geom[i, 1]))
            rank = seen.get(pair, 0)
            seen[pair] = rank + 1
            mujoco.mj_contactForce(m, d, i, self._buf)
            force = float(self._buf[0])
            key = pair + (rank,)
            old = self.best.get(key)
            if old is None or force > old[0]:
                self.best[key] = [force, pos[i].copy(), pair]
            if force > self.max_force:
                self.max_force = force


class _Tangent:
    """NumPy twin of ``bcg_envs.physics.tangent`` via ``mj_integratePos``/``mj_differentiatePos``."""

    def __init__(self, model: mujoco.MjModel):
        self.m = model
        self.quat = bool(np.any(np.isin(model.jnt_type, [mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL])))
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


# ======================================================================================
# One environment on MuJoCo C
# ======================================================================================
class _Shared:
    """Everything the environments of one task share: model, program, maps, threads."""

    def __init__(self, env_name: str, env_kwargs: Dict[str, Any], nthread: Optional[int] = None):
        self.jax_env: MjxEnv = make_jax(env_name, **env_kwargs)
        env = self.jax_env
        self.model: mujoco.MjModel = env.mj_model
        m = self.model
        self.n_substeps = int(env.physics.n_substeps)
        self.nq, self.nv, self.na, self.nu = int(m.nq), int(m.nv), int(m.na), int(m.nu)
        self.nx = 2 * self.nv + self.na
        self.program = _TaskProgram(env, m)
        self.action_map = _ActionMap(env, self.nu)
        self.tangent = _Tangent(m)
        self.nstate = mujoco.mj_stateSize(m, _FULL)
        self.nint = mujoco.mj_stateSize(m, _INTEGRATION)
        below = lambda bit: mujoco.mj_stateSize(m, int(_FULL) & (int(bit) - 1))
        S = mujoco.mjtState
        self.off_qpos, self.off_qvel, self.off_act = below(S.mjSTATE_QPOS), below(S.mjSTATE_QVEL), below(S.mjSTATE_ACT)
        self.nthread = _default_threads() if nthread is None else nthread
        self.rollout = mj_rollout.Rollout(nthread=self.nthread)
        self._rollout_data = [mujoco.MjData(m) for _ in range(max(self.nthread, 1))]
        self.reset_fn = jax.jit(self._reset)
        self.reset_batch = jax.jit(jax.vmap(self._reset))
        self.body_of_geom = np.asarray(m.geom_bodyid)
        self.metric_keys = self.program.metric_keys
        self.episode_length = int(env.episode_length)
        self.info_dtypes = {k: dt for k, (_, dt) in self.program._info_avals.items()}
        self.info_dtypes.update({k: np.float32 for k in self.metric_keys})
        self.info_dtypes.update(bundle_dropped=np.int32, bundle_alpha=np.float32)

    def _reset(self, key):
        rng, k = jax.random.split(key)
        qpos, qvel, task_info = self.jax_env.initial_state(k)
        return jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32), task_info

    def close(self):
        if self.rollout is not None:
            self.rollout.close()
            self.rollout = None

    def run_rollout(self, states: np.ndarray, ctrl: np.ndarray, warmstart: np.ndarray) -> np.ndarray:
        """Roll every (state, ctrl) for one control step: (k, n_substeps, nstate)."""
        out, _ = self.rollout.rollout(
            self.model, self._rollout_data, states, ctrl[:, None, :], nstep=self.n_substeps,
            initial_warmstart=np.atleast_2d(warmstart),
        )
        return out

    def state_parts(self, states: np.ndarray):
        o = self.off_qpos, self.off_qvel, self.off_act
        return (states[..., o[0] : o[0] + self.nq], states[..., o[1] : o[1] + self.nv], states[..., o[2] : o[2] + self.na])

    def new_info(self, task_info: Dict[str, np.ndarray]) -> Dict[str, Any]:
        """Host-side task info (Python scalars, NumPy arrays), the keys of ``state_from``."""
        info = {"step": 0, "bundle_window": 0, "bundled": False, "sim_diverged": False, "truncated": False,
                "max_contact_force": 0.0, "bundle_dropped": 0, "bundle_alpha": 1.0}
        for k, v in task_info.items():
            v = np.asarray(v)
            info[k] = v.item() if v.ndim == 0 else v
        return info


class _Core:
    """One environment: a C ``MjData``, its task info and its last reward metrics."""

    def __init__(self, shared: _Shared):
        self.s = shared
        m = shared.model
        self.d = mujoco.MjData(m)
        self._snap = np.zeros(shared.nint)
        self._prev_d = mujoco.MjData(m)
        self._scratch = mujoco.MjData(m)
        self.info: Optional[Dict[str, Any]] = None
        self.metrics: Dict[str, np.float32] = {}
        self.leaves: Dict[int, np.ndarray] = {}
        self.obs: Optional[np.ndarray] = None
        self.episode = 0

    # ----- state ---------------------------------------------------------------------------
    def load(self, qpos, qvel, act, info: Dict[str, Any]) -> None:
        """Fresh data at (qpos, qvel, act), as ``MjxEnv.state_from`` (ctrl, time, warmstart 0)."""
        m, d = self.s.model, self.d
        mujoco.mj_resetData(m, d)
        d.qpos[:] = qpos
        d.qvel[:] = qvel
        if self.s.na and act is not None:
            d.act[:] = act
        mujoco.mj_forward(m, d)
        self.info = info
        self.metrics = {k: 0.0 for k in self.s.metric_keys}
        self.leaves = self.s.program.read(d)

    def reset_outputs(self) -> np.ndarray:
        """Observation of the current state (``state_from``)."""
        out = self.evaluate(self.leaves, np.zeros(self.s.nu, np.float32), self.leaves, self.info)
        obs, *_ = self.s.program.unpack(out)
        self.obs = obs
        return obs

    def evaluate(self, prev, action, data, info) -> np.ndarray:
        p = self.s.program
        return p(*p.pack(prev, action, data, info))

    def get_state(self):
        d = self.d
        return d.qpos.copy(), d.qvel.copy(), d.act.copy()

    def info_dict(self) -> Dict[str, Any]:
        """A fresh info dict (arrays copied: callers may keep or modify it)."""
        out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.info.items()}
        out.update(self.metrics)
        return out

    # ----- physics ------------------------------------------------------------------------
    def begin(self) -> None:
        mujoco.mj_getState(self.s.model, self.d, self._snap, _INTEGRATION)
        self._warn = self.d.warning.number[_BAD_SLICE].tolist()

    def substeps(self, ctrl: np.ndarray) -> _ContactLog:
        m, d = self.s.model, self.d
        d.ctrl[:] = ctrl
        log = _ContactLog()
        for _ in range(self.s.n_substeps):
            mujoco.mj_step(m, d)
            log.record(m, d)
        return log

    def replay(self, ctrl: np.ndarray, states: np.ndarray, start: np.ndarray, warmstart: np.ndarray) -> _ContactLog:
        """Contact forces of a rolled-out step (``rollout`` returns states only).

        Each substep's start state is rechecked for contacts (``mj_kinematics`` +
        ``mj_collision``, exact: same state, same contacts); only substeps with contacts,
        and the last one, rerun ``mj_forward`` (with the previous replayed ``qacc`` as
        warmstart, so forces match the rollout's to the solver tolerance). ``d`` ends at
        the rolled-out state holding the last substep's contacts and constraint forces,
        as after ``mj_step``, and its ``qacc_warmstart`` seeds the next rollout.
        """
        m, d, s = self.s.model, self.d, self.s
        log = _ContactLog()
        d.ctrl[:] = ctrl
        warm = warmstart
        last = s.n_substeps - 1
        for k in range(s.n_substeps):
            mujoco.mj_setState(m, d, start if k == 0 else states[k - 1], _FULL)
            if k < last:
                mujoco.mj_kinematics(m, d)
                mujoco.mj_collision(m, d)
                if not d.ncon:
                    continue
            d.qacc_warmstart[:] = warm
            mujoco.mj_forward(m, d)
            log.record(m, d)
            warm = d.qacc.copy()
        # d holds the last substep's forward pass; move it to the rolled-out end state.
        mujoco.mj_setState(m, d, states[-1], _FULL)
        d.qacc_warmstart[:] = warm
        return log

    def diverged(self, rolled_time_ok: bool = True) -> bool:
        d = self.d
        # MuJoCo resets the data (and warns) on a non-finite or huge state, so the
        # warning counters catch what the state check alone would miss.
        warned = d.warning.number[_BAD_SLICE].tolist() != self._warn
        vmax = np.abs(d.qvel).max() if d.qvel.size else 0.0
        return bool(warned or not rolled_time_ok or not np.isfinite(d.qpos.sum()) or not vmax < MAX_QVEL)

    def finish(self, diverged: bool, log: _ContactLog, trigger: bool, window: int, clipped) -> Dict[int, np.ndarray]:
        """Revert or refresh after the physics; update info; returns the prev leaves."""
        m, d = self.s.model, self.d
        prev = self.leaves
        if diverged:
            mujoco.mj_setState(m, d, self._snap, _INTEGRATION)
            mujoco.mj_forward(m, d)
            d.warning.number[_BAD_SLICE] = self._warn
        else:
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            self.leaves = self.s.program.read(d)
        info = self.info
        info["step"] += 1
        info["bundle_window"] = int(window)
        info["bundled"] = bool(trigger)
        info["sim_diverged"] = bool(diverged)
        info["max_contact_force"] = float(np.float32(log.max_force))
        info["bundle_dropped"], info["bundle_alpha"] = 0, 1.0  # grad_step overwrites them
        return prev

    def outputs(self, out: np.ndarray):
        obs, reward, done, metrics = self.s.program.unpack(out)
        self.obs = obs
        self.metrics = metrics
        self.info["truncated"] = self.info["step"] >= self.s.episode_length
        truncated = self.info["truncated"] and not done
        return obs, reward, done, truncated

    # ----- trigger logic (``DifferentiableStep._trigger`` / ``_next_window``) ------------
    def trigger(self, estimator: str, cfg: BundleConfig, log: _ContactLog) -> Tuple[bool, int, bool]:
        window = int(self.info["bundle_window"])
        pressing = log.max_force > cfg.force_threshold
        if estimator == "bcg":
            trig = bool(pressing or window > 0)
            nxt = cfg.horizon - 1 if pressing else max(window - 1, 0)
            return trig, nxt, pressing
        return estimator != "exact", 0, pressing


# ======================================================================================
# Finite-difference Jacobians
# ======================================================================================
class _Transition:
    """``f(dx, du)`` of one control step from a saved state, batched through ``Rollout``:
    the tangent offset of the next state from ``ref`` (the nominal next state)."""

    def __init__(self, shared: _Shared, state: np.ndarray, warmstart: np.ndarray, action: np.ndarray, ref: np.ndarray):
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


def _global_sigma(s: _Shared, cfg: BundleConfig, zeroth: bool) -> np.ndarray:
    """``bcg_envs.gradients.perturbations.global_sigma`` in NumPy."""
    pos, vel = cfg.state_sigma
    act = pos if zeroth else 0.0
    u = cfg.action_sigma if (cfg.action_sigma > 0 or not zeroth) else pos
    return np.concatenate([np.full(s.nv, pos), np.full(s.nv, vel), np.full(s.na, act), np.full(s.nu, u)])


def _sample(rng: np.random.Generator, draw: Callable[[], Tuple[np.ndarray, np.ndarray]], cfg: BundleConfig):
    n = cfg.num_samples // 2 if cfg.antithetic else cfg.num_samples
    pairs = [draw() for _ in range(n)]
    dx = np.stack([p[0] for p in pairs])
    du = np.stack([p[1] for p in pairs])
    if cfg.antithetic:
        dx, du = np.concatenate([dx, -dx]), np.concatenate([du, -du])
    return dx, du


def _contact_sampler(core: _Core, log: _ContactLog, cfg: BundleConfig, rng: np.random.Generator):
    """Contact-local offsets (``bcg_envs.gradients.perturbations.contact_sampler``) with the
    contact Jacobian from ``mj_jac`` at the step's start state."""
    s = core.s
    m, d0 = s.model, core._prev_d
    contacts = list(log.best.values())
    pressing = [c for c in contacts if c[0] > cfg.force_threshold]
    active = pressing if pressing else [c for c in contacts if c[0] > 0]
    rows = []
    jp1, jp2 = np.zeros((3, s.nv)), np.zeros((3, s.nv))
    for force, point, (g1, g2) in active:
        mujoco.mj_jac(m, d0, jp1, None, point, int(s.body_of_geom[g1]))
        mujoco.mj_jac(m, d0, jp2, None, point, int(s.body_of_geom[g2]))
        rows.append(jp1 - jp2)
    J = np.concatenate(rows) if rows else np.zeros((0, s.nv))
    gram = J @ J.T + cfg.damping * np.eye(J.shape[0])
    chain = np.any(np.abs(J) > 0, axis=0).astype(np.float64)
    pos_sigma, vel_sigma = cfg.state_sigma

    def draw():
        dx = np.zeros(s.nx)
        if cfg.space == "cartesian":
            dp = pos_sigma * rng.standard_normal(J.shape[0])
            dv = vel_sigma * rng.standard_normal(J.shape[0])
            dx[: s.nv] = J.T @ np.linalg.solve(gram, dp) if J.shape[0] else 0.0
            dx[s.nv : 2 * s.nv] = J.T @ np.linalg.solve(gram, dv) if J.shape[0] else 0.0
        else:
            dx[: s.nv] = pos_sigma * chain * rng.standard_normal(s.nv)
            dx[s.nv : 2 * s.nv] = vel_sigma * chain * rng.standard_normal(s.nv)
        return dx, cfg.action_sigma * rng.standard_normal(s.nu)

    return draw


def _estimate(core: _Core, f: _Transition, estimator: str, cfg: BundleConfig, log: _ContactLog, trigger: bool,
              rng: np.random.Generator):
    """(A, B, bundle_dropped, alpha) of one step, as ``DifferentiableStep._jacobians``."""
    s = core.s
    nx, nu = s.nx, s.nu
    zx, zu = np.zeros((1, nx)), np.zeros((1, nu))
    if estimator == "exact" or (estimator == "bcg" and not trigger):
        A, B = f.jacobians_at(zx, zu)
        ok = bool(_finite(A, B)[0])
        dropped = (0 if ok else 1) if estimator == "exact" else (0 if ok else cfg.num_samples)
        return (A[0] if ok else np.zeros((nx, nx))), (B[0] if ok else np.zeros((nx, nu))), dropped, 1.0
    if estimator == "bcg":
        draw = _contact_sampler(core, log, cfg, rng)
    else:
        sigma = _global_sigma(s, cfg, zeroth=estimator in ("zeroth", "alpha"))
        draw = lambda: (lambda w: (w[:nx], w[nx:]))(sigma * rng.standard_normal(nx + nu))
    dx, du = _sample(rng, draw, cfg)
    n = dx.shape[0]
    if estimator in ("bundle", "bcg"):
        A_i, B_i = f.jacobians_at(dx, du)
        valid = _finite(A_i, B_i)
        return _masked_mean(A_i, valid), _masked_mean(B_i, valid), int(n - valid.sum()), 1.0
    sigma = np.maximum(_global_sigma(s, cfg, zeroth=True), 1e-12)
    Y = f(np.concatenate([zx, dx]), np.concatenate([zu, du]))
    dy = Y[1:] - Y[:1]
    w = np.concatenate([dx, du], 1)
    valid = _finite(dy)
    zeroth = _least_squares(w, np.where(valid[:, None], dy, 0.0), valid, sigma)
    if estimator == "zeroth":
        return zeroth[:, :nx], zeroth[:, nx:], int(n - valid.sum()), 0.0
    # alpha: AoBG, alpha * first + (1 - alpha) * zeroth by inverse sample variance.
    A_i, B_i = f.jacobians_at(dx, du)
    valid = valid & _finite(A_i, B_i)
    nv_ = max(int(valid.sum()), 1)
    first_i = np.concatenate([A_i, B_i], axis=2)
    first = _masked_mean(first_i, valid)
    zeroth = _least_squares(w, np.where(valid[:, None], dy, 0.0), valid, sigma)
    stein_i = np.where(valid[:, None], dy, 0.0)[:, :, None] * (w / sigma**2)[:, None, :]

    def total_var(samples):
        if not np.any(valid):
            return 0.0
        mean = samples[valid].mean(0)
        return float(np.sum((samples[valid] - mean) ** 2) / max(nv_ - 1.0, 1.0) / nv_)

    s1, s0 = total_var(first_i), total_var(stein_i)
    alpha = s0 / (s0 + s1) if s0 + s1 > 0 else 1.0
    AB = alpha * first + (1.0 - alpha) * zeroth
    return AB[:, :nx], AB[:, nx:], int(n - valid.sum()), float(alpha)


# ======================================================================================
# Stepping (shared by the single and vector envs)
# ======================================================================================
def _physics(core: _Core, action: np.ndarray, estimator: str, cfg: BundleConfig, rolled=None, keep_start=False):
    """Advance ``core.d`` by one control step (MuJoCo C), not yet refreshed or reverted.

    Returns (clipped action, contact log, trigger, next bundle window, diverged,
    (start state, start warmstart) or (None, None)).
    """
    s = core.s
    clipped = np.minimum(np.maximum(action, -1.0), 1.0).astype(np.float32)
    ctrl = s.action_map(clipped)
    core.begin()
    start = warm = None
    if keep_start or rolled is not None:
        start = np.zeros(s.nstate)
        mujoco.mj_getState(s.model, core.d, start, _FULL)
        warm = core.d.qacc_warmstart.copy()
    if rolled is None:
        log = core.substeps(ctrl)
        time_ok = True
    else:
        log = core.replay(ctrl, rolled, start, warm)
        time_ok = abs(rolled[-1, 0] - (start[0] + s.n_substeps * s.model.opt.timestep)) < 0.5 * s.model.opt.timestep
    trig, window, _ = core.trigger(estimator, cfg, log)
    if estimator != "bcg":
        window = 0
    diverged = core.diverged(time_ok)
    return clipped, log, trig, window, diverged, (start, warm)


def _mean_forward(core: _Core, f: _Transition, estimator: str, cfg: BundleConfig, log: _ContactLog, rng) -> None:
    """``BundleConfig.forward == "mean"``: move the next state by the mean branch offset."""
    s = core.s
    if estimator == "bcg":
        draw = _contact_sampler(core, log, cfg, rng)
    else:
        sigma = _global_sigma(s, cfg, zeroth=estimator in ("zeroth", "alpha"))
        draw = lambda: (lambda w: (w[: s.nx], w[s.nx :]))(sigma * rng.standard_normal(s.nx + s.nu))
    dx, du = _sample(rng, draw, cfg)
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


class _Stepper:
    """``step``/``grad_step`` of one core (the single env, and the vector env's grad_step)."""

    def __init__(self, shared: _Shared):
        self.s = shared
        env = shared.jax_env
        self.default_estimator = env.estimator
        self.default_bundle = env.bundle
        self._configs: Dict[Optional[BundleConfig], BundleConfig] = {}

    def config(self, bundle: Optional[BundleConfig]) -> BundleConfig:
        if bundle is not None and not isinstance(bundle, BundleConfig):
            raise ValueError(f"bundle must be a BundleConfig or None, got {type(bundle).__name__}")
        if bundle not in self._configs:
            self._configs[bundle] = (bundle or self.default_bundle).with_defaults(self.s.jax_env.default_force_threshold)
        return self._configs[bundle]

    def rng(self, core: _Core, cfg: BundleConfig) -> np.random.Generator:
        """The step's perturbation generator: seeded by ``BundleConfig.seed``, the episode
        (drawn from the env's seed at reset) and the step count."""
        return np.random.default_rng([cfg.seed, core.episode, int(core.info["step"])])

    def step(self, core: _Core, action: np.ndarray):
        est, cfg = self.default_estimator, self.config(None)
        mean = cfg.forward == "mean" and est != "exact"
        clipped, log, trig, window, diverged, (start, warm) = _physics(core, action, est, cfg, keep_start=mean)
        if mean and trig and not diverged:
            self._mean(core, start, warm, clipped, est, cfg, log, self.rng(core, cfg))
        prev = core.finish(diverged, log, trig, window, clipped)
        out = core.evaluate(prev, clipped, core.leaves, core.info)
        return core.outputs(out)

    def _mean(self, core, start, warm, clipped, est, cfg, log, rng):
        s = self.s
        ref = np.concatenate([core.d.qpos, core.d.qvel, core.d.act])
        f = _Transition(s, start, warm, clipped.astype(np.float64), ref)
        self._load_prev(core, start, warm)
        _mean_forward(core, f, est, cfg, log, rng)

    def _load_prev(self, core: _Core, start, warm) -> None:
        """``core._prev_d``: the step's start state with kinematics (for contact Jacobians)."""
        m, d0 = self.s.model, core._prev_d
        mujoco.mj_setState(m, d0, start, _FULL)
        mujoco.mj_kinematics(m, d0)
        mujoco.mj_comPos(m, d0)

    def grad_step(self, core: _Core, action: np.ndarray, estimator: Optional[str], bundle: Optional[BundleConfig]):
        s = self.s
        est = check_estimator(estimator or self.default_estimator)
        cfg = self.config(bundle)
        rng = self.rng(core, cfg)
        action = np.asarray(action, np.float32)
        mujoco.mj_copyData(core._prev_d, s.model, core.d)  # start state, refreshed kinematics
        prev_snapshot = core._prev_d
        clipped, log, trig, window, diverged, (start, warm) = _physics(core, action, est, cfg, keep_start=True)
        nx, nu = s.nx, s.nu
        if diverged:
            prev = core.finish(True, log, trig, window, clipped)
            out = core.evaluate(prev, clipped, core.leaves, core.info)
            res = core.outputs(out)
            jac = Jacobians(np.zeros((nx, nx)), np.zeros((nx, nu)), np.zeros(nx), np.zeros(nu), np.zeros((s.program.nobs, nx)))
            core.info["bundle_dropped"] = 0
            core.info["bundle_alpha"] = 1.0
            return res, jac
        ref = np.concatenate([core.d.qpos, core.d.qvel, core.d.act])
        f = _Transition(s, start, warm, clipped.astype(np.float64), ref)
        if cfg.forward == "mean" and est != "exact" and trig:
            # The same branches as the Jacobians below (a generator with the same seed).
            _mean_forward(core, f, est, cfg, log, self.rng(core, cfg))
        A, B, dropped, alpha = _estimate(core, f, est, cfg, log, trig, rng)
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

    def _task_jacobians(self, core: _Core, d0: mujoco.MjData, action: np.ndarray, A, B):
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
            scratch = core._scratch
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


# ======================================================================================
# Gymnasium environments
# ======================================================================================
class MujocoGymEnv(gymnasium.Env):
    """A bcg_envs task stepped in MuJoCo C (``gym.make(id, backend="mujoco")``).

    Same spaces, info keys, truncation, reset distribution, divergence handling and
    ``grad_step`` contract as ``bcg_envs.gym.GymEnv``; float64 physics.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(self, env_name: str, *, render_mode: Optional[str] = None, width: int = 320, height: int = 240,
                 **env_kwargs: Any) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.env_name = env_name
        self._shared = _Shared(env_name, env_kwargs)
        self.jax_env: MjxEnv = self._shared.jax_env
        self.render_mode = render_mode
        self.metadata = dict(self.metadata, render_fps=int(round(1.0 / self.jax_env.dt)))
        self._size = (height, width)
        self._renderer = None
        self._core = _Core(self._shared)
        self._stepper = _Stepper(self._shared)
        self._started = False
        nobs = self.jax_env.observation_size
        self.observation_space = spaces.Box(-OBS_BOUND, OBS_BOUND, (nobs,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (self.jax_env.action_size,), np.float32)

    @property
    def model(self) -> mujoco.MjModel:
        """The ``mujoco.MjModel`` simulated (contact stiffness applied)."""
        return self._shared.model

    @property
    def data(self) -> mujoco.MjData:
        """The live ``mujoco.MjData`` (read it; change the state through ``set_state``)."""
        return self._core.d

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        key = jax.random.PRNGKey(int(self.np_random.integers(0, 2**31 - 1)))
        qpos, qvel, task_info = jax.device_get(self._shared.reset_fn(key))
        core = self._core
        core.episode = int(self.np_random.integers(0, 2**31 - 1))
        core.load(np.asarray(qpos, np.float64), np.asarray(qvel, np.float64), None, self._shared.new_info(task_info))
        obs = core.reset_outputs()
        self._started = True
        return obs, core.info_dict()

    def step(self, action):
        self._require_reset()
        action = check_action(action, self.action_space.shape)
        obs, reward, done, truncated = self._stepper.step(self._core, action)
        return obs, reward, done, truncated, self._core.info_dict()

    def grad_step(self, action, estimator: Optional[str] = None, bundle: Optional[BundleConfig] = None) -> GradStepResult:
        """``step`` plus the step's Jacobians from finite differences in MuJoCo C."""
        self._require_reset()
        if estimator is not None:
            check_estimator(estimator)
        self._stepper.config(bundle)
        action = check_action(action, self.action_space.shape)
        (obs, reward, done, truncated), jac = self._stepper.grad_step(self._core, action, estimator, bundle)
        return GradStepResult(obs, reward, done, truncated, self._core.info_dict(), jac)

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        self._require_reset()
        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, *self._size)
        return render_state(self._renderer, self.jax_env, self.get_state(), self._core.info)

    def close(self):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._shared.close()

    def get_state(self):
        """(qpos, qvel, act) as float64 NumPy arrays."""
        self._require_reset()
        return self._core.get_state()

    def set_state(self, qpos, qvel, act=None) -> None:
        """Set the simulator state; the episode's task info (goal, step count) is kept."""
        self._require_reset()
        m = self.model
        qpos = _check_vector(qpos, m.nq, "qpos")
        qvel = _check_vector(qvel, m.nv, "qvel")
        act = None if act is None else _check_vector(act, m.na, "act")
        core = self._core
        core.load(qpos, qvel, act, core.info)
        core.reset_outputs()

    def _require_reset(self) -> None:
        if not self._started:
            raise RuntimeError(f"{self.env_name}: call reset() before step(), grad_step() or state access")


class MujocoVectorEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` copies stepped together by ``mujoco.rollout``, with same-step autoreset.

    The task functions run once per step for the whole batch (one vmapped jit call).
    When an episode ends, ``step`` returns the new episode's first observation and puts
    the last one in ``info["final_obs"]`` (mask ``info["_final_obs"]``).
    """

    metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}

    def __init__(self, env_name: str, num_envs: int, *, render_mode: Optional[str] = None, **env_kwargs: Any):
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if render_mode is not None:
            raise ValueError("MujocoVectorEnv does not render; use render_mode=None")
        self.env_name = env_name
        self._shared = _Shared(env_name, env_kwargs)
        self.jax_env: MjxEnv = self._shared.jax_env
        self.num_envs = num_envs
        self.render_mode = None
        nobs, nu = self.jax_env.observation_size, self.jax_env.action_size
        self.single_observation_space = spaces.Box(-OBS_BOUND, OBS_BOUND, (nobs,), np.float32)
        self.single_action_space = spaces.Box(-1.0, 1.0, (nu,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._cores = [_Core(self._shared) for _ in range(num_envs)]
        self._stepper = _Stepper(self._shared)
        self._started = False

    @property
    def model(self) -> mujoco.MjModel:
        return self._shared.model

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        base = int(self.np_random.integers(0, 2**31 - 1))
        keys = jax.random.split(jax.random.PRNGKey(base), self.num_envs)
        self._load(np.arange(self.num_envs), keys)
        obs = self._observe_all(np.arange(self.num_envs))
        self._started = True
        return obs, self._infos()

    def _load(self, idx: np.ndarray, keys) -> None:
        qpos, qvel, task_info = jax.device_get(self._shared.reset_batch(keys))
        for j, i in enumerate(idx):
            core = self._cores[i]
            core.episode = int(self.np_random.integers(0, 2**31 - 1))
            ti = {k: np.asarray(v[j]) for k, v in task_info.items()}
            core.load(np.asarray(qpos[j], np.float64), np.asarray(qvel[j], np.float64), None, self._shared.new_info(ti))

    def _observe_all(self, idx) -> np.ndarray:
        p = self._shared.program
        packs = [p.pack(self._cores[i].leaves, np.zeros(p.nu, np.float32), self._cores[i].leaves, self._cores[i].info) for i in idx]
        out = p(np.stack([x[0] for x in packs]), np.stack([x[1] for x in packs]), batched=True)
        obs, *_ = p.unpack(out)
        for j, i in enumerate(idx):
            self._cores[i].obs = obs[j]
        return obs

    def step(self, actions):
        self._require_reset()
        actions = check_action(actions, self.action_space.shape, "actions")
        s = self._shared
        m = s.model
        est, cfg = self._stepper.default_estimator, self._stepper.config(None)
        clipped = np.clip(actions, -1.0, 1.0).astype(np.float32)
        ctrl = s.action_map(clipped)
        n = self.num_envs
        starts = np.empty((n, s.nstate))
        warm = np.empty((n, s.nv))
        for i, core in enumerate(self._cores):
            mujoco.mj_getState(m, core.d, starts[i], _FULL)
            warm[i] = core.d.qacc_warmstart
        rolled = s.run_rollout(starts, ctrl, warm)
        # A rollout stops advancing time where MuJoCo reset a diverging state.
        h = m.opt.timestep
        end_ok = np.abs(rolled[:, -1, 0] - (starts[:, 0] + s.n_substeps * h)) < 0.5 * h
        q, v, _ = s.state_parts(rolled[:, -1])
        vmax = np.abs(v).max(axis=1) if s.nv else np.zeros(n)
        diverged = ~end_ok | ~np.isfinite(q.sum(axis=1)) | ~(vmax < MAX_QVEL)
        mean = cfg.forward == "mean" and est != "exact"
        p = s.program
        fv = np.empty((n, p.nf), np.float32)
        iv = np.empty((n, p.ni), np.int32)
        for i, core in enumerate(self._cores):
            core.begin()
            if diverged[i]:
                log = _ContactLog()
            else:
                log = core.replay(ctrl[i], rolled[i], starts[i], warm[i])
            trig, window, _ = core.trigger(est, cfg, log)
            if est != "bcg":
                window = 0
            if mean and trig and not diverged[i]:
                self._stepper._mean(core, starts[i], warm[i], clipped[i], est, cfg, log, self._stepper.rng(core, cfg))
            prev = core.finish(bool(diverged[i]), log, trig, window, clipped[i])
            fv[i], iv[i] = p.pack(prev, clipped[i], core.leaves, core.info)
        obs, reward, done, metrics = p.unpack(p(fv, iv, batched=True))
        for i, core in enumerate(self._cores):
            core.obs = obs[i]
            core.metrics = {k: x[i] for k, x in metrics.items()}
            core.info["truncated"] = core.info["step"] >= s.episode_length
        return self._outputs(reward, done)

    def grad_step(self, actions, estimator: Optional[str] = None, bundle: Optional[BundleConfig] = None) -> GradStepResult:
        """Batched ``grad_step`` (a loop over the envs): every Jacobian gets a leading ``num_envs`` axis."""
        self._require_reset()
        if estimator is not None:
            check_estimator(estimator)
        self._stepper.config(bundle)
        actions = check_action(actions, self.action_space.shape, "actions")
        results, jacs = [], []
        for i, core in enumerate(self._cores):
            res, jac = self._stepper.grad_step(core, actions[i], estimator, bundle)
            results.append(res)
            jacs.append(jac)
        reward = np.array([r[1] for r in results], np.float32)
        done = np.array([r[2] for r in results])
        out = self._outputs(reward, done)
        jac = Jacobians(*(np.stack([getattr(j, f) for j in jacs]) for f in Jacobians._fields))
        return GradStepResult(*out, jac)

    def _outputs(self, reward: np.ndarray, done: np.ndarray):
        """Batched step outputs with same-step autoreset (core obs/info already updated)."""
        trunc = np.array([bool(c.info["truncated"]) for c in self._cores]) & ~done
        infos = self._infos()
        final_obs = np.stack([c.obs for c in self._cores])
        ended = done | trunc
        if np.any(ended):
            idx = np.flatnonzero(ended)
            keys = jax.random.split(jax.random.PRNGKey(int(self.np_random.integers(0, 2**31 - 1))), idx.size)
            self._load(idx, keys)
            self._observe_all(idx)
        infos["final_obs"] = final_obs
        infos["_final_obs"] = ended
        obs = np.stack([c.obs for c in self._cores])
        return obs, reward, done, trunc, infos

    def _infos(self) -> Dict[str, Any]:
        """Batched info with MJX's dtypes (int32 counters, float32 values)."""
        dicts = [c.info_dict() for c in self._cores]
        dtypes = self._shared.info_dtypes
        return {k: np.asarray([d[k] for d in dicts], dtype=dtypes.get(k)) for k in dicts[0]}

    def close_extras(self, **kwargs):
        self._shared.close()

    def _require_reset(self) -> None:
        if not self._started:
            raise RuntimeError(f"{self.env_name}: call reset() before step() or grad_step()")


# ======================================================================================
# Benchmark
# ======================================================================================
def _timeit(fn: Callable[[], Any], number: int, repeat: int = 5) -> float:
    """Best of ``repeat`` blocks of ``number`` calls, seconds per call (the best block is
    the least disturbed by other processes on a shared machine)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best


def _transition_fd(shared: _Shared, d0: mujoco.MjData, ctrl: np.ndarray, eps: float = FD_EPS):
    """(A, B) of the control step by ``mjd_transitionFD`` per substep, composed."""
    m, nx, nu = shared.model, shared.nx, shared.nu
    d = mujoco.MjData(m)
    mujoco.mj_copyData(d, m, d0)
    d.ctrl[:] = ctrl
    A, B = np.eye(nx), np.zeros((nx, nu))
    Ak, Bk = np.zeros((nx, nx)), np.zeros((nx, nu))
    for _ in range(shared.n_substeps):
        mujoco.mjd_transitionFD(m, d, eps, True, Ak, Bk, None, None)
        A, B = Ak @ A, Ak @ B + Bk
        mujoco.mj_step(m, d)
    return A, B @ shared.action_map.M


def benchmark(env_name: str = "BoxPush-v0", steps: int = 200, num_envs: int = 16, mjx_grad: bool = False) -> Dict[str, float]:
    """Print (and return) the costs behind ``backend="mujoco"``, measured in one run.

    * Gym single-env ``step`` latency: ``backend="mujoco"`` vs Gymnasium's ``Pusher-v5``
      (MuJoCo C, 5 substeps, NumPy task code) vs ``backend="mjx"``, as ratios.
    * Task-function inputs per step: ``mjx.put_data`` vs the packed leaves.
    * ``grad_step(estimator="exact")``: whole-step central differences through ``Rollout``
      vs ``mjd_transitionFD`` per substep composed (speed and agreement), at a contact state.
    * Vector ``step``: ``MujocoVectorEnv`` vs ``GymVectorEnv`` (MJX vmap).
    ``mjx_grad=True`` adds MJX's ``grad_step`` (compiling it takes minutes on CPU).
    """
    from bcg_envs.gym import GymEnv, GymVectorEnv

    out: Dict[str, float] = {}
    n = max(steps // 5, 1)
    env = MujocoGymEnv(env_name)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (64,) + env.action_space.shape).astype(np.float32)
    k = [0]

    def stepper(e):
        def f():
            k[0] = (k[0] + 1) % len(actions)
            _, _, term, trunc, _ = e.step(actions[k[0]])
            if term or trunc:
                e.reset()
        return f

    out["mujoco_step_us"] = 1e6 * _timeit(stepper(env), n)
    mjx_env = GymEnv(env_name)
    mjx_env.reset(seed=0)
    out["mjx_step_us"] = 1e6 * _timeit(stepper(mjx_env), n)
    try:
        pusher = gymnasium.make("Pusher-v5")
        pusher.reset(seed=0)
        pa = pusher.action_space.sample()

        def pstep():
            _, _, term, trunc, _ = pusher.step(pa)
            if term or trunc:
                pusher.reset()

        out["pusher_v5_step_us"] = 1e6 * _timeit(pstep, n)
        pusher.close()
    except Exception as err:  # noqa: BLE001 - report why it could not be built
        print(f"Pusher-v5 unavailable: {err!r}")
    print(f"single-env step latency ({env_name}, best of 5 x {n} steps):")
    print(f"  backend='mujoco' {out['mujoco_step_us']:8.1f} us")
    if "pusher_v5_step_us" in out:
        print(f"  Pusher-v5        {out['pusher_v5_step_us']:8.1f} us   mujoco / Pusher-v5 = "
              f"{out['mujoco_step_us'] / out['pusher_v5_step_us']:.2f}")
    print(f"  backend='mjx'    {out['mjx_step_us']:8.1f} us   mjx / mujoco = {out['mjx_step_us'] / out['mujoco_step_us']:.1f}")

    # Task-function inputs: put_data vs packed leaves (+ the one jit dispatch).
    core, program = env._core, env._shared.program
    d = core.d
    out["put_data_us"] = 1e6 * _timeit(lambda: mjx.put_data(env.model, d), max(n // 10, 3))
    out["read_pack_us"] = 1e6 * _timeit(
        lambda: program.pack(core.leaves, actions[0], program.read(d), core.info), n)
    fv, iv = program.pack(core.leaves, actions[0], core.leaves, core.info)
    out["program_call_us"] = 1e6 * _timeit(lambda: program(fv, iv), n)
    print(f"task inputs: mjx.put_data {out['put_data_us']:.0f} us/step; packed leaves {out['read_pack_us']:.1f} us "
          f"+ jitted task call {out['program_call_us']:.1f} us")

    # grad_step: FD schemes at a smooth contact state (BoxPush: the pusher pressing the -x
    # face of a box that slides and spins, so no contact or friction regime switches within
    # the step) or the current state.
    a = np.clip(actions[1], -1, 1)
    if env_name == "BoxPush-v0":
        env.set_state(np.array([-0.073, 0.0, 0.0, 0.0, 0.0]), np.array([0.4, 0.25, 0.3, 0.25, 2.0]))
        a = np.array([0.8, 0.0], np.float32)
    s = env._shared
    start = np.zeros(s.nstate)
    mujoco.mj_getState(s.model, d, start, _FULL)
    d0 = mujoco.MjData(s.model)
    mujoco.mj_copyData(d0, s.model, d)
    dn = mujoco.MjData(s.model)
    mujoco.mj_copyData(dn, s.model, d)
    dn.ctrl[:] = s.action_map(a)
    for _ in range(s.n_substeps):
        mujoco.mj_step(s.model, dn)
    f = _Transition(s, start, d.qacc_warmstart.copy(), a.astype(np.float64), np.concatenate([dn.qpos, dn.qvel, dn.act]))
    zx, zu = np.zeros((1, s.nx)), np.zeros((1, s.nu))
    A1, B1 = (x[0] for x in f.jacobians_at(zx, zu))
    A2, B2 = _transition_fd(s, d0, s.action_map(a))
    reps = max(n // 20, 3)
    out["fd_whole_step_ms"] = 1e3 * _timeit(lambda: f.jacobians_at(zx, zu), reps)
    out["fd_transitionFD_ms"] = 1e3 * _timeit(lambda: _transition_fd(s, d0, s.action_map(a)), reps)
    rel = lambda x, y: float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-12))
    out["fd_schemes_rel_diff"] = max(rel(A2, A1), rel(B2, B1))
    print(f"exact Jacobians (nx={s.nx}, nu={s.nu}, {s.n_substeps} substeps, rollout threads={s.nthread}): "
          f"whole-step central FD via Rollout {out['fd_whole_step_ms']:.2f} ms, "
          f"mjd_transitionFD per substep {out['fd_transitionFD_ms']:.2f} ms; they agree to {out['fd_schemes_rel_diff']:.1e}")
    qpos, qvel, _ = env.get_state()

    def grad():
        env.set_state(qpos, qvel)
        env.grad_step(a, estimator="exact")

    out["mujoco_grad_step_ms"] = 1e3 * _timeit(grad, reps)
    print(f"grad_step(exact) backend='mujoco' {out['mujoco_grad_step_ms']:.2f} ms")
    if mjx_grad:
        mjx_env.grad_step(a, estimator="exact")
        out["mjx_grad_step_ms"] = 1e3 * _timeit(lambda: mjx_env.grad_step(a, estimator="exact"), reps)
        print(f"grad_step(exact) backend='mjx'    {out['mjx_grad_step_ms']:.2f} ms")

    # Vector envs.
    vec = MujocoVectorEnv(env_name, num_envs)
    vec.reset(seed=0)
    mvec = GymVectorEnv(env_name, num_envs)
    mvec.reset(seed=0)
    va = rng.uniform(-1, 1, (num_envs,) + env.action_space.shape).astype(np.float32)
    out["mujoco_vec_step_ms"] = 1e3 * _timeit(lambda: vec.step(va), max(n // 4, 3))
    out["mjx_vec_step_ms"] = 1e3 * _timeit(lambda: mvec.step(va), max(n // 4, 3))
    print(f"vector step, {num_envs} envs: MujocoVectorEnv {out['mujoco_vec_step_ms']:.2f} ms, "
          f"GymVectorEnv (MJX) {out['mjx_vec_step_ms']:.2f} ms, ratio {out['mjx_vec_step_ms'] / out['mujoco_vec_step_ms']:.1f}")
    vec.close()
    env.close()
    return out


if __name__ == "__main__":
    benchmark()
