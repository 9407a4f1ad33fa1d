"""Task logic on C data: the task's JAX functions, compiled once over the ``mjx.Data``
leaves they read, and the copies of those leaves from a C ``MjData``."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.envs.base import OBS_BOUND, STEP_INFO
from bcg_envs.mujoco_backend import mjx_layout
from bcg_envs.mujoco_backend.task_spec import TaskSpec

#: Info entries ``MjxEnv.state_from`` creates (the rest are the task's own).
_BASE_INFO = ("rng", *STEP_INFO)


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


class TaskProgram:
    """``(prev, action, data, info) -> (obs, reward, done, success, weighted terms, task
    info)``, jitted once: the task's ``MjxEnv.finish_step`` (the same function the MJX
    step calls) on leaves read from C data. The task's own info entries come back only
    when the task overrides ``update_info``.
    Inputs travel as one float and one int vector holding only the leaves it reads.
    """

    def __init__(self, spec: TaskSpec):
        self.spec = spec
        self.model = model = spec.mj_model
        d = mujoco.MjData(model)
        mujoco.mj_forward(model, d)
        template = mjx.put_data(model, d)
        flat, self._treedef = jax.tree_util.tree_flatten_with_path(template)
        self._paths = [jax.tree_util.keystr(p) for p, _ in flat]
        self._avals = [(tuple(x.shape), np.dtype(x.dtype)) for _, x in flat]
        info_spec = spec.info_spec
        self.info_keys = list(info_spec)
        self.info_avals = {k: (tuple(info_spec[k].shape), np.dtype(info_spec[k].dtype)) for k in self.info_keys}
        self.metric_keys = [f"reward/{k}" for k in spec.reward_keys]
        self.task_info_keys = [k for k in self.info_keys if k not in _BASE_INFO] if spec.updates_info else []
        self.nu = int(model.nu)

        # Which leaves do the task functions read?
        n = len(self._paths)
        specs = [jax.ShapeDtypeStruct(s, t) for s, t in self._avals]
        info_specs = {k: jax.ShapeDtypeStruct(*self.info_avals[k]) for k in self.info_keys}
        closed = jax.make_jaxpr(self._task)(specs, jax.ShapeDtypeStruct((self.nu,), np.float32), specs, info_specs)
        self.nobs = int(np.prod(closed.out_avals[0].shape, dtype=np.int64))  # the observation comes first
        live = _live_inputs(closed.jaxpr)
        info_order = sorted(self.info_keys)  # dict flattening order
        self.prev_used = [i for i in range(n) if live[i]]
        self.data_used = [i for i in range(n) if live[n + 1 + i]]
        self.info_used = [k for k, on in zip(info_order, live[2 * n + 1 :]) if on]

        self._layout = mjx_layout.ContactLayout(model)
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
            shape, dtype = self.info_avals[k]
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
        self._slots = [
            (groups[g], k, integer, off, off + size, len(shape) > 1)
            for g, k, shape, integer, off, size in self._entries
        ]
        self._task_info_sizes = [int(np.prod(self.info_avals[k][0], dtype=np.int64)) for k in self.task_info_keys]
        self.nout = self.nobs + 3 + len(self.metric_keys) + sum(self._task_info_sizes)
        self._obs_low, self._obs_high = np.array(-OBS_BOUND, np.float32), np.array(OBS_BOUND, np.float32)
        self._fns: Dict[tuple, Callable] = {}

    # ----- the traced function ------------------------------------------------------------
    def _task(self, prev_leaves, action, data_leaves, info):
        prev = jax.tree_util.tree_unflatten(self._treedef, prev_leaves)
        data = jax.tree_util.tree_unflatten(self._treedef, data_leaves)
        obs, reward, done, info, weighted = self.spec.finish_step(prev, jnp.clip(action, -1.0, 1.0), data, info)
        return obs, reward, done, info["is_success"], weighted, {k: info[k] for k in self.task_info_keys}

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
                    out.append(
                        leaves[group][i].astype(
                            dtype if np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.bool_) else fdt
                        )
                    )
                else:
                    out.append(jnp.zeros(shape, dtype if not np.issubdtype(dtype, np.floating) else fdt))
            return out

        info = {}
        for k in self.info_keys:
            shape, dtype = self.info_avals[k]
            if k in leaves["info"]:
                v = leaves["info"][k]
                info[k] = v.astype(dtype) if not np.issubdtype(dtype, np.floating) else v
            else:
                info[k] = jnp.zeros(shape, dtype if not np.issubdtype(dtype, np.floating) else fdt)
        obs, reward, done, success, weighted, task_info = self._task(rebuild("prev"), action, rebuild("data"), info)
        parts = [
            jnp.ravel(obs).astype(fdt),
            jnp.reshape(reward, (1,)).astype(fdt),
            jnp.reshape(done, (1,)).astype(fdt),
            jnp.reshape(success, (1,)).astype(fdt),
        ]
        parts += [jnp.reshape(weighted[k.split("/", 1)[1]], (1,)).astype(fdt) for k in self.metric_keys]
        parts += [jnp.ravel(task_info[k]).astype(fdt) for k in self.task_info_keys]
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
        kind, source = mjx_layout.leaf_source(path, int(np.prod(shape, dtype=np.int64)), probe)
        return _Leaf(path, shape, dtype, kind, source)

    def read(self, d: mujoco.MjData) -> Dict[int, np.ndarray]:
        """The used leaves of ``d`` (after kinematics), as float64 / int arrays."""
        out: Dict[int, np.ndarray] = {}
        cmap = self._layout.contact_map(d) if self._needs_cmap else None
        slow = None
        for i, leaf in self.leaves.items():
            if leaf.kind == "public":
                v = np.array(getattr(d, leaf.source), dtype=np.float64 if not leaf.integer else np.int64).reshape(
                    leaf.shape
                )
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

    def reader(self, d: mujoco.MjData) -> Callable[[], Dict[int, np.ndarray]]:
        """``read(d)`` as a function of no arguments for one ``MjData`` that lives as long:
        where every used leaf is a public field, it copies from views taken once here
        (attribute access on ``MjData`` builds a new array per call, ~0.5 us each); the
        same values as ``read``."""
        if any(leaf.kind != "public" for leaf in self.leaves.values()):
            return lambda: self.read(d)
        views = []
        for i, leaf in self.leaves.items():
            view = getattr(d, leaf.source)
            views.append(
                (i, view, np.int64 if leaf.integer else np.float64, None if view.shape == leaf.shape else leaf.shape)
            )

        def read() -> Dict[int, np.ndarray]:
            out: Dict[int, np.ndarray] = {}
            for i, view, dtype, shape in views:
                v = np.array(view, dtype=dtype)
                out[i] = v if shape is None else v.reshape(shape)
            return out

        return read

    @property
    def all_public(self) -> bool:
        """Whether every used leaf is a public ``MjData`` field (a fixed-size array)."""
        return all(leaf.kind == "public" for leaf in self.leaves.values())

    def list_reader(self, d: mujoco.MjData) -> Callable[[], Dict[int, list]]:
        """For ``all_public`` programs: a function of no arguments returning the used leaves
        of ``d`` as flat Python lists (``tolist`` of views taken once: one call per leaf,
        exact values); ``arrays_from_lists`` turns them into ``read``'s arrays."""
        views = [(i, getattr(d, leaf.source).reshape(-1)) for i, leaf in self.leaves.items()]
        return lambda: {i: view.tolist() for i, view in views}

    def arrays_from_lists(self, lists: Dict[int, list]) -> Dict[int, np.ndarray]:
        """``read``'s float64 / int64 arrays from ``list_reader``'s lists (same values)."""
        out = {}
        for i, values in lists.items():
            leaf = self.leaves[i]
            out[i] = np.array(values, dtype=np.int64 if leaf.integer else np.float64).reshape(leaf.shape)
        return out

    def pack_lists(
        self, prev: Dict[int, list], action: list, data: Dict[int, list], info: Dict[str, Any]
    ) -> Tuple[list, list]:
        """``pack``'s (float, int) vectors as Python lists, from flat leaf lists: one NumPy
        assignment each then fills the program's inputs (the same float32 / int32 values)."""
        floats: list = []
        ints: list = []
        for group, key, _, integer, _, _ in self._entries:
            if group == "prev":
                values = prev[key]
            elif group == "data":
                values = data[key]
            elif group == "action":
                values = action
            else:
                v = info[key]
                values = v.reshape(-1).tolist() if isinstance(v, np.ndarray) else (v,)
            (ints if integer else floats).extend(values)
        return floats, ints

    def list_packer(self) -> Callable[[Dict[int, list], list, Dict[int, list], Dict[str, Any]], Tuple[list, list]]:
        """``pack_lists`` compiled for this program's layout: one expression building both
        lists (no loop over the entries, no branching per entry), the same values."""
        parts: Dict[bool, List[str]] = {False: [], True: []}
        for group, key, shape, integer, _, _ in self._entries:
            if group == "action":
                expr = "action"
            elif group in ("prev", "data"):
                expr = f"{group}[{key!r}]"
            else:  # an info entry: an array (flattened) or a scalar (Python or NumPy)
                flat = "_v.tolist()" if len(shape) == 1 else "_v.reshape(-1).tolist()"
                expr = f"({flat} if isinstance(_v := info[{key!r}], ndarray) else (_v,))"
            parts[integer].append(f"*{expr}")
        floats, ints = ", ".join(parts[False]), ", ".join(parts[True])
        source = f"def pack(prev, action, data, info):\n    return [{floats}], [{ints}]\n"
        namespace: Dict[str, Any] = {"ndarray": np.ndarray}
        exec(compile(source, f"<{type(self).__name__}.list_packer>", "exec"), namespace)
        return namespace["pack"]

    def shared_inputs(self) -> Optional[Tuple[np.ndarray, np.ndarray, jax.Array, jax.Array]]:
        """The program's (float, int) inputs as NumPy arrays and JAX arrays on the same
        memory (``jax.dlpack``, zero-copy on CPU): writing the NumPy arrays sets what the
        next call reads, and a call on JAX arrays skips the per-call host transfer of
        NumPy inputs (~3 us). None where JAX would not share the memory (a default device
        other than the CPU, a copying import): then pass NumPy arrays. The caller writes
        them only while no call on them is running (after reading its output)."""
        try:
            device = jax.devices()[0]
            if device.platform != "cpu" or jax.config.jax_default_device is not None:
                return None
            out = []
            for n, dtype in ((self.nf, np.float32), (self.ni, np.int32)):
                dtype = np.dtype(dtype)
                # A 64-byte aligned host array: XLA's CPU client imports it without a copy.
                raw = np.zeros(max(n, 1) * dtype.itemsize + 64, np.uint8)
                start = -raw.ctypes.data % 64
                host = raw[start : start + n * dtype.itemsize].view(dtype)
                shared = jax.dlpack.from_dlpack(host)
                if n and shared.unsafe_buffer_pointer() != host.ctypes.data:
                    return None
                if shared.devices() != {device}:
                    return None
                out.append((host, shared))
        except Exception:  # pragma: no cover - a JAX without zero-copy DLPack import
            return None
        (fhost, fshared), (ihost, ishared) = out
        return fhost, ihost, fshared, ishared

    def pack(
        self,
        prev: Dict[int, np.ndarray],
        action,
        data: Dict[int, np.ndarray],
        info: Dict[str, Any],
        fdtype=np.float32,
    ):
        """The program's (float, int) input vectors."""
        fvec = np.empty(self.nf, fdtype)
        ivec = np.empty(self.ni, np.int32)
        src = (prev, data, info, {None: action})
        for g, key, integer, lo, hi, flat in self._slots:
            v = src[g][key]
            (ivec if integer else fvec)[lo:hi] = v.reshape(-1) if flat else v
        return fvec, ivec

    def unpack_one(self, out: np.ndarray):
        """``unpack`` of one output (same values and types) through one ``tolist``: a few
        NumPy calls fewer, ~4 us per step, for small observations without task entries."""
        n = self.nobs
        if self.task_info_keys or n > 64 or out.dtype != np.float32:
            return self.unpack(out)
        values = out.tolist()
        lo, hi = -OBS_BOUND, OBS_BOUND  # float32 values: clipping a float32 in float64 is exact
        obs = np.array([lo if x < lo else (hi if x > hi else x) for x in values[:n]], np.float32)
        metrics = dict(zip(self.metric_keys, values[n + 3 : n + 3 + len(self.metric_keys)]))
        return obs, values[n], values[n + 1] > 0.5, metrics, {"is_success": values[n + 2] > 0.5}

    def unpack(self, out: np.ndarray):
        """obs (float32), reward, done, weighted terms, info updates (``is_success`` and the
        task's own entries): Python scalars for one output, arrays for a batch."""
        # Clipping commutes with the cast to float32 (the bound is a float32 value).
        obs = np.maximum(out[..., : self.nobs], self._obs_low)
        np.minimum(obs, self._obs_high, out=obs)
        if obs.dtype != np.float32:
            obs = obs.astype(np.float32)
        nm = len(self.metric_keys)
        updates: Dict[str, Any] = {}
        off = self.nobs + 3 + nm
        for k, size in zip(self.task_info_keys, self._task_info_sizes):
            shape, dtype = self.info_avals[k]
            v = out[..., off : off + size].astype(dtype)
            updates[k] = v.reshape(out.shape[:-1] + shape)
            off += size
        if out.ndim == 1:
            rest = out[self.nobs : self.nobs + 3 + nm].tolist()
            if updates:
                updates = {k: (v.item() if v.ndim == 0 else v) for k, v in updates.items()}
            updates["is_success"] = rest[2] > 0.5
            return obs, rest[0], rest[1] > 0.5, dict(zip(self.metric_keys, rest[3:])), updates
        reward = out[:, self.nobs].astype(np.float32)
        done = out[:, self.nobs + 1] > 0.5
        updates["is_success"] = out[:, self.nobs + 2] > 0.5
        metrics = {k: out[:, self.nobs + 3 + j].astype(np.float32) for j, k in enumerate(self.metric_keys)}
        return obs, reward, done, metrics, updates
