"""The simulation of one environment on MuJoCo C: what a task's envs share (``TaskModel``:
model, program, maps, rollout threads) and the per-env core (``EnvCore``: state, substeps,
divergence, task outputs, the fused single-env step)."""

from __future__ import annotations

import copy
import os
from array import array
from math import isfinite
from typing import Any, Dict, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import rollout as mj_rollout

from bcg_envs.envs.base import OBS_BOUND, STEP_INFO
from bcg_envs.gradients.config import BundleConfig
from bcg_envs.gradients.registry import Estimator
from bcg_envs.gradients.trigger import bundle_decision_scalar
from bcg_envs.mujoco_backend.action_map import ActionMap, PhysicsAction
from bcg_envs.mujoco_backend.contact_log import ContactLog
from bcg_envs.mujoco_backend.model_fields import write_model_fields
from bcg_envs.mujoco_backend.tangent import Tangent
from bcg_envs.mujoco_backend.task_program import TaskProgram
from bcg_envs.mujoco_backend.task_spec import TaskSpec
from bcg_envs.physics import model_fields
from bcg_envs.physics.divergence import MAX_QVEL, diverged_lists

#: State signatures of ``mj_getState``: everything a step depends on (rollout starts), and
#: what integration changes (restoring a step's start).
FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS
INTEGRATION_STATE = mujoco.mjtState.mjSTATE_INTEGRATION
_BAD = sorted(
    int(w)
    for w in (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL)
)
assert _BAD == list(range(_BAD[0], _BAD[0] + 3))
_BAD_SLICE = slice(_BAD[0], _BAD[0] + 3)
#: ``INTEGRATION_STATE`` as an int (converting the enum per call costs ~0.5 us).
_INTEGRATION = int(INTEGRATION_STATE)
_FLOAT32 = np.dtype(np.float32)


def _default_threads() -> int:
    """``TaskModel``'s default rollout threads: one per CPU this process may use, at most 8;
    0 (the calling thread alone) on one CPU."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        n = os.cpu_count() or 1
    return 0 if n <= 1 else min(n, 8)


class TaskModel:
    """Everything the environments of one task share: model, program, maps, threads."""

    def __init__(self, spec: TaskSpec, nthread: Optional[int] = None):
        """``nthread``: threads of the shared ``Rollout`` (None: up to 8, one per CPU)."""
        self.spec = spec
        self.model: mujoco.MjModel = spec.mj_model
        m = self.model
        self.n_substeps = int(spec.n_substeps)
        self.nq, self.nv, self.na, self.nu = int(m.nq), int(m.nv), int(m.na), int(m.nu)
        self.nx = 2 * self.nv + self.na
        self.program = TaskProgram(spec)
        self.action_map = ActionMap(spec.action_to_ctrl, self.nu)
        self.physics_action = PhysicsAction(spec)
        self.tangent = Tangent(m)
        self.nstate = mujoco.mj_stateSize(m, FULL_STATE)
        self.nint = mujoco.mj_stateSize(m, INTEGRATION_STATE)
        below = lambda bit: mujoco.mj_stateSize(m, int(FULL_STATE) & (int(bit) - 1))
        S = mujoco.mjtState
        self.off_qpos, self.off_qvel, self.off_act = below(S.mjSTATE_QPOS), below(S.mjSTATE_QVEL), below(S.mjSTATE_ACT)
        self.nthread = _default_threads() if nthread is None else nthread
        self.rollout = mj_rollout.Rollout(nthread=self.nthread)
        self._rollout_data = [mujoco.MjData(m) for _ in range(max(self.nthread, 1))]
        self.reset_fn = jax.jit(self._reset)
        self.reset_batch = jax.jit(jax.vmap(self._reset))
        self.body_of_geom = np.asarray(m.geom_bodyid)
        self.body_of_geom_list = [int(b) for b in m.geom_bodyid]
        self.metric_keys = self.program.metric_keys
        self.episode_length = spec.episode_length
        self.info_dtypes = {k: dt for k, (_, dt) in self.program.info_avals.items()}
        self.info_dtypes.update({k: np.float32 for k in self.metric_keys})
        self.info_dtypes.update({k: STEP_INFO[k][0] for k in ("bundle_dropped", "bundle_alpha")})

    def with_model(self, model: mujoco.MjModel) -> "TaskModel":
        """This task on ``model``, a copy of ``self.model`` (same sizes) that one env owns
        and whose fields each reset redraws (``randomize="episode"``); it shares the
        program, the maps and the rollout threads."""
        new = copy.copy(self)
        new.model = model
        new.tangent = Tangent(model)
        return new

    def _reset(self, key):
        """(qpos, qvel, task info) of a new episode from ``key``, as ``MjxEnv.reset``: the
        initial state from the split key and, with ``randomize="episode"``, the episode's
        model fields (``"model/<field>"`` entries) from that key folded with 1."""
        rng, k = jax.random.split(key)
        qpos, qvel, task_info = self.spec.initial_state(k)
        if self.spec.draw_model is not None:
            task_info = {**task_info, **model_fields.as_info(self.spec.draw_model(jax.random.fold_in(k, 1)))}
        return jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32), task_info

    def close(self):
        if self.rollout is not None:
            self.rollout.close()
            self.rollout = None

    def run_rollout(
        self,
        states: np.ndarray,
        ctrl: np.ndarray,
        warmstart: np.ndarray,
        models: Optional[Sequence[mujoco.MjModel]] = None,
    ) -> np.ndarray:
        """Roll every (state, ctrl) for one control step: (k, n_substeps, nstate); ``models``:
        one model per row (each env's own), None: ``self.model`` for all."""
        out, _ = self.rollout.rollout(
            self.model if models is None else models,
            self._rollout_data,
            states,
            ctrl[:, None, :],
            nstep=self.n_substeps,
            initial_warmstart=np.atleast_2d(warmstart),
        )
        return out

    def state_parts(self, states: np.ndarray):
        o = self.off_qpos, self.off_qvel, self.off_act
        return (
            states[..., o[0] : o[0] + self.nq],
            states[..., o[1] : o[1] + self.nv],
            states[..., o[2] : o[2] + self.na],
        )

    def new_info(self, task_info: Dict[str, np.ndarray]) -> Dict[str, Any]:
        """Host-side task info (Python scalars, NumPy arrays), the keys of ``state_from``."""
        info: Dict[str, Any] = {k: value for k, (_, value) in STEP_INFO.items()}
        for k, v in task_info.items():
            v = np.asarray(v)
            info[k] = v.item() if v.ndim == 0 else v
        return info


class EnvCore:
    """One environment: a C ``MjData``, its task info and its last reward metrics."""

    def __init__(self, shared: TaskModel):
        self.s = shared
        m = shared.model
        self.d = mujoco.MjData(m)
        # Views into ``d`` (stable for its lifetime): attribute access on MjData builds a
        # new array per call, ~0.5 us each on the per-step path.
        self._qpos, self._qvel, self._ctrl = self.d.qpos, self.d.qvel, self.d.ctrl
        self._bad_warnings = self.d.warning.number[_BAD_SLICE]
        self._snap = np.zeros(shared.nint)
        self._read = shared.program.reader(self.d)
        # ``plain_step``'s constants and buffers, built at its first call (``_fused_plan``).
        self._plan: Optional[tuple] = None
        self._plan_stepper: Any = None
        self._ints: Optional[list] = None  # what ``plain_step`` last wrote into the int inputs
        self._warn: list = []
        self.prev_data = mujoco.MjData(m)
        self.scratch_data = mujoco.MjData(m)
        self.info: Optional[Dict[str, Any]] = None
        self._array_keys: list = []
        self._array_keys_of: Optional[Dict[str, Any]] = None
        self._array_keys_len = -1
        self.metrics: Dict[str, np.float32] = {}
        self._leaves: Optional[Dict[int, np.ndarray]] = {}
        #: The leaves as flat lists where ``plain_step`` read them last (None: see ``_leaves``).
        self._leaf_lists: Optional[Dict[int, list]] = None
        self.obs: Optional[np.ndarray] = None
        self.episode = 0
        #: The info whose model fields ``model`` holds (``randomize="episode"``).
        self._model_info: Optional[Dict[str, Any]] = None

    @property
    def leaves(self) -> Dict[int, np.ndarray]:
        """The program's used leaves of the current state (float64 / int64 arrays, as
        ``TaskProgram.read``); ``plain_step`` keeps them as lists and they are built from
        those at the first access after it."""
        if self._leaves is None:
            self._leaves = self.s.program.arrays_from_lists(self._leaf_lists)
        return self._leaves

    @leaves.setter
    def leaves(self, value: Dict[int, np.ndarray]) -> None:
        self._leaves, self._leaf_lists = value, None

    # ----- state ---------------------------------------------------------------------------
    def load(self, qpos, qvel, act, info: Dict[str, Any]) -> None:
        """Fresh data at (qpos, qvel, act), as ``MjxEnv.state_from`` (ctrl, time, warmstart 0);
        the episode's model fields in ``info`` (``"model/<field>"``) go into this env's model."""
        m, d = self.s.model, self.d
        fields = model_fields.from_info(info)
        if fields is not None and info is not self._model_info:  # set_state reloads the episode's info
            write_model_fields(m, d, fields)
            self._model_info = info
        mujoco.mj_resetData(m, d)
        d.qpos[:] = qpos
        d.qvel[:] = qvel
        if self.s.na and act is not None:
            d.act[:] = act
        mujoco.mj_forward(m, d)
        self.info = info
        self.metrics = {k: 0.0 for k in self.s.metric_keys}
        self.leaves = self._read()

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

    def set_step(self, step: int) -> None:
        """Set the episode step counter (control steps since reset) and ``truncated`` with it."""
        self.info["step"] = int(step)
        self.info["truncated"] = bool(step >= self.s.episode_length)

    def info_dict(self) -> Dict[str, Any]:
        """A fresh info dict (arrays copied: callers may keep or modify it)."""
        info = self.info
        if self._array_keys_of is not info or len(info) != self._array_keys_len:
            # The keys holding arrays: fixed per key (by the entry's shape) for an info
            # dict, so found once per episode and not per step (~2 us).
            self._array_keys = [k for k, v in info.items() if isinstance(v, np.ndarray)]
            self._array_keys_of, self._array_keys_len = info, len(info)
        out = info.copy()
        for k in self._array_keys:
            v = out[k]
            if isinstance(v, np.ndarray):
                out[k] = v.copy()
        out.update(self.metrics)
        return out

    # ----- physics ------------------------------------------------------------------------
    def begin(self) -> None:
        mujoco.mj_getState(self.s.model, self.d, self._snap, INTEGRATION_STATE)
        self._warn = self._bad_warnings.tolist()

    def substeps(self, ctrl: np.ndarray) -> ContactLog:
        m, d = self.s.model, self.d
        self._ctrl[:] = ctrl
        log = ContactLog()
        log.start(m, d)
        step = mujoco.mj_step
        for _ in range(self.s.n_substeps):
            step(m, d)
            if d.ncon:
                log.record(m, d)
        return log

    def replay(self, ctrl: np.ndarray, states: np.ndarray, start: np.ndarray, warmstart: np.ndarray) -> ContactLog:
        """Contact forces of a rolled-out step (``rollout`` returns states only).

        Each substep's start state is rechecked for contacts (``mj_kinematics`` +
        ``mj_collision``, exact: same state, same contacts); only substeps with contacts,
        and the last one, rerun ``mj_forward`` (with the previous replayed ``qacc`` as
        warmstart, so forces match the rollout's to the solver tolerance). ``d`` ends at
        the rolled-out state holding the last substep's contacts and constraint forces,
        as after ``mj_step``, and its ``qacc_warmstart`` seeds the next rollout.
        """
        m, d, s = self.s.model, self.d, self.s
        log = ContactLog()
        log.start(m, d)
        d.ctrl[:] = ctrl
        warm = warmstart
        last = s.n_substeps - 1
        for k in range(s.n_substeps):
            mujoco.mj_setState(m, d, start if k == 0 else states[k - 1], FULL_STATE)
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
        mujoco.mj_setState(m, d, states[-1], FULL_STATE)
        d.qacc_warmstart[:] = warm
        return log

    def diverged(self, rolled_time_ok: bool = True) -> bool:
        # MuJoCo resets the data (and warns) on a non-finite or huge state, so the
        # warning counters catch what the state check alone would miss.
        if self._bad_warnings.tolist() != self._warn or not rolled_time_ok:
            return True
        # The state check of both backends (bcg_envs.physics.divergence), on lists: fast.
        return diverged_lists(self._qpos.tolist(), self._qvel.tolist(), self.d.act.tolist() if self.s.na else ())

    def finish(self, diverged: bool, log: ContactLog, trigger: bool, window: int, clipped) -> Dict[int, np.ndarray]:
        """Revert or refresh after the physics; update info; returns the prev leaves."""
        m, d = self.s.model, self.d
        prev = self.leaves
        if diverged:
            mujoco.mj_setState(m, d, self._snap, INTEGRATION_STATE)
            mujoco.mj_forward(m, d)
            d.warning.number[_BAD_SLICE] = self._warn
        else:
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            self.leaves = self._read()
        info = self.info
        info["step"] += 1
        info["bundle_window"] = int(window)
        info["bundled"] = bool(trigger)
        info["sim_diverged"] = bool(diverged)
        if log.events:
            info["max_contact_force"] = float(np.float32(log.max_force))
            info["max_contact_rise"] = float(np.float32(log.max_rise))
            info["max_point_force"] = float(np.float32(log.max_point_force))
        else:  # all are 0.0 without contact events
            info["max_contact_force"] = info["max_contact_rise"] = info["max_point_force"] = 0.0
        info["bundle_dropped"], info["bundle_alpha"] = 0, 1.0  # grad_step overwrites them
        return prev

    def outputs(self, out: np.ndarray):
        """(obs, reward, terminated, truncated) from the program's output; updates ``obs``,
        ``metrics`` and the info."""
        obs, reward, done, metrics, updates = self.s.program.unpack_one(out)
        self.obs = obs
        self.metrics = metrics
        self.info.update(updates)
        self.info["truncated"] = self.info["step"] >= self.s.episode_length
        truncated = self.info["truncated"] and not done
        return obs, reward, done, truncated

    def _fused_plan(self, stepper) -> tuple:
        """``plain_step``'s constants: views into ``d`` (attribute access on ``MjData``
        builds a new array per call), the action map's terms, the program's packer and its
        shared inputs (``TaskProgram.shared_inputs``), the stepper's memoized decisions."""
        s, d = self.s, self.d
        p = s.program
        # Per used leaf: reuse the qpos / qvel / act lists of the divergence check, or a
        # flat view to read (``TaskProgram.list_reader``).
        reuse = {"qpos": 0, "qvel": 1, "act": 2}
        leaves = tuple(
            (i, reuse.get(leaf.source, 3), getattr(d, leaf.source).reshape(-1)) for i, leaf in p.leaves.items()
        )
        shared = p.shared_inputs()
        if shared is None:  # NumPy inputs, converted by each call
            fhost, ihost = np.empty(p.nf, np.float32), np.empty(p.ni, np.int32)
            fargs, iargs = fhost, ihost
        else:
            fhost, ihost, fargs, iargs = shared
        self._ints = None
        terms = s.action_map.terms
        n = p.nobs
        simple_out = not p.task_info_keys and n <= 64
        return (
            s.model,
            d,
            memoryview(self._ctrl),
            None if terms is None else tuple(terms),
            self._snap,
            memoryview(self._bad_warnings),
            memoryview(self._qpos),
            memoryview(self._qvel),
            memoryview(d.act) if s.na else None,
            range(s.n_substeps),
            s.body_of_geom_list,
            np.zeros(6),
            stepper._decisions,
            stepper._decide,
            stepper._cfg,
            leaves,
            p.list_packer(),
            memoryview(fhost),
            ihost,
            fargs,
            iargs,
            p.function(False),
            n,
            n + 3,
            n + 3 + len(s.metric_keys),
            s.metric_keys,
            simple_out,
            s.episode_length,
        )

    @staticmethod
    def _logged_substeps(m, d, substeps, body, force_buf, start: bool = True) -> Optional[ContactLog]:
        """``substeps()`` after ``ctrl`` is set, its contact log only where it has contacts;
        ``start=False``: the step started without contacts (whatever ``d.ncon`` says)."""
        log = None
        if start and d.ncon:
            log = ContactLog(points=False, body=body, buf=force_buf)
            log.start(m, d)
        step = mujoco.mj_step
        for _ in substeps:
            step(m, d)
            if d.ncon:
                if log is None:  # no contacts at the start: start() would record none
                    log = ContactLog(points=False, body=body, buf=force_buf)
                log.record(m, d)
        return log

    def plain_step(self, action: np.ndarray, stepper):
        """``step`` without Jacobians, fused for the single env: (obs, reward, terminated,
        truncated, info (a fresh dict)). For tasks whose physics action is the identity,
        whose action map is affine and whose program reads public ``MjData`` fields only
        (``Stepper.fused``); ``stepper`` gives the memoized trigger decisions.

        The values of the general path (``Stepper.step``), bit for bit, in ~65 us less per
        step on BoxPush (``bcg-envs bench --tables backends``: 3.1x -> 1.7x Pusher-v5's
        step, where ~20 us is the program's JAX call alone): between ``mj_step`` calls,
        whose work evicts Python's, NumPy's and JAX's code and data from the caches, every
        call costs several times its warm cost, so the step does as few as it can. The
        few numbers of the action, the state, the leaves and the program's inputs travel
        as Python lists (read through ``memoryview``s, and the qpos / qvel lists of the
        divergence check are the leaves), the program's inputs are written into memory
        its JAX inputs share (no host transfer per call), the contact points that only
        the bundle samplers read are not kept, a step without contacts builds no contact
        log, and an env that has had no contact steps its substeps in one call.
        """
        plan = self._plan
        if plan is None or self._plan_stepper is not stepper:
            plan = self._plan = self._fused_plan(stepper)
            self._plan_stepper = stepper
        (
            m,
            d,
            ctrl,
            terms,
            snap,
            bad,
            qpos,
            qvel,
            act,
            substeps,
            body,
            force_buf,
            decisions,
            decide,
            cfg,
            leaves,
            pack,
            fhost,
            ihost,
            fargs,
            iargs,
            program,
            n,
            n_metrics,
            n_end,
            metric_keys,
            simple_out,
            episode_length,
        ) = plan
        if action.dtype == _FLOAT32:
            # Clipping a float32 in float64 gives the same (float32) value as NumPy's.
            clipped = [-1.0 if x < -1.0 else (1.0 if x > 1.0 else x) for x in action.tolist()]
        else:
            clipped = np.minimum(np.maximum(action, -1.0), 1.0).astype(np.float32).tolist()
        if terms is not None:
            ctrl[:] = array("d", [c + clipped[k] * w for c, k, w in terms])
        else:
            self._ctrl[:] = self.s.action_map(np.array(clipped, np.float32))
        # begin(), substeps() and trigger()
        mujoco.mj_getState(m, d, snap, _INTEGRATION)
        self._warn = warn = bad.tolist()
        if d.maxuse_con:
            log = self._logged_substeps(m, d, substeps, body, force_buf)
        else:
            # No contact since this data was made: all substeps in one call (as Gymnasium's
            # MuJoCo envs step), no log. A step that meets a contact (the peak contact
            # count rises; MuJoCo's own resets keep it) is redone substep by substep from
            # its start, for its log: the same step (``mj_setState`` of the integration
            # state restores everything ``mj_step`` reads), and the warning counters as
            # the first pass left them (the second pass counts its warnings again).
            log = None
            mujoco.mj_step(m, d, len(substeps))
            if d.maxuse_con:
                warning = d.warning
                counts, lastinfo = warning.number.copy(), warning.lastinfo.copy()
                mujoco.mj_setState(m, d, snap, _INTEGRATION)
                log = self._logged_substeps(m, d, substeps, body, force_buf, start=False)
                warning.number[:], warning.lastinfo[:] = counts, lastinfo
        events = log is not None and bool(log.events)
        info = self.info
        key = (events and bool(log.pressing(cfg)), info["bundle_window"])
        trig, window = decisions.get(key) or decide(*key)
        # diverged(), inlined: the sums are a fast exact test of the common case (a sum of
        # |qvel| below the bound bounds every entry; a finite sum has finite terms).
        qp, qv = qpos.tolist(), qvel.tolist()
        av = act.tolist() if act is not None else []
        if bad.tolist() != warn:
            diverged = True
        elif isfinite(sum(qp)) and sum(map(abs, qv)) < MAX_QVEL and isfinite(sum(av)):
            diverged = False
        else:
            diverged = diverged_lists(qp, qv, av)
        # finish()
        prev = self._leaf_lists
        if prev is None:
            prev = {i: v.reshape(-1).tolist() for i, v in self._leaves.items()}
        if diverged:
            mujoco.mj_setState(m, d, snap, _INTEGRATION)
            mujoco.mj_forward(m, d)
            d.warning.number[_BAD_SLICE] = warn
            data = prev
        else:
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            state = (qp, qv, av)
            data = {i: state[j] if j < 3 else view.tolist() for i, j, view in leaves}
        self._leaves, self._leaf_lists = None, data
        info["step"] += 1
        info["bundle_window"] = int(window)
        info["bundled"] = bool(trig)
        info["sim_diverged"] = diverged
        if events:
            info["max_contact_force"] = float(np.float32(log.max_force))
            info["max_contact_rise"] = float(np.float32(log.max_rise))
            info["max_point_force"] = float(np.float32(log.max_point_force))
        else:  # all are 0.0 without contact events
            info["max_contact_force"] = info["max_contact_rise"] = info["max_point_force"] = 0.0
        info["bundle_dropped"], info["bundle_alpha"] = 0, 1.0
        floats, ints = pack(prev, clipped, data, info)
        # array("f") rounds as NumPy's float32 cast does (inf beyond the range, no error).
        fhost[:] = array("f", floats)
        if ints != self._ints:
            ihost[:] = self._ints = ints
        out = program(fargs, iargs)
        if simple_out:  # ``TaskProgram.unpack_one`` inlined
            # The output's buffer (which waits for the result) as float32, to a list:
            # ``np.asarray(out).tolist()``'s values through a few Python frames less.
            values = memoryview(out).cast("B").cast("f").tolist()
            lo, hi = -OBS_BOUND, OBS_BOUND  # float32 values: clipping a float32 in float64 is exact
            obs = np.array([lo if x < lo else (hi if x > hi else x) for x in values[:n]], np.float32)
            reward, done = values[n], values[n + 1] > 0.5
            self.metrics = metrics = dict(zip(metric_keys, values[n_metrics:n_end]))
            info["is_success"] = values[n + 2] > 0.5
        else:
            obs, reward, done, metrics, updates = self.s.program.unpack_one(np.asarray(out))
            self.metrics = metrics
            info.update(updates)
        self.obs = obs
        truncated = info["truncated"] = info["step"] >= episode_length
        # info_dict(), inlined
        if self._array_keys_of is not info or len(info) != self._array_keys_len:
            self._array_keys = [k for k, v in info.items() if isinstance(v, np.ndarray)]
            self._array_keys_of, self._array_keys_len = info, len(info)
        result = info | metrics
        for k in self._array_keys:
            v = result[k]
            if isinstance(v, np.ndarray):
                result[k] = v.copy()
        return obs, reward, done, truncated and not done, result

    # ----- trigger logic (``bcg_envs.gradients.trigger``, shared with the MJX step) -------
    def trigger(self, estimator: Estimator, cfg: BundleConfig, log: ContactLog) -> Tuple[bool, int]:
        """(whether this step bundles, the next step's bundle window; 0 unless ``bcg``)."""
        return bundle_decision_scalar(estimator, bool(log.pressing(cfg)), int(self.info["bundle_window"]), cfg.horizon)
