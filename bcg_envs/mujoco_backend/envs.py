"""``MujocoSimulation`` and ``MujocoBatchSimulation``: the simulations behind the Gymnasium
envs of ``backend="mujoco"`` (``bcg_envs.gym.Simulation``/``BatchSimulation``; arguments
arrive checked by the Gymnasium classes)."""

from __future__ import annotations

import copy
import functools
from typing import Any, Dict, Optional

import jax
import mujoco
import numpy as np

from bcg_envs.envs.base import Jacobians, MjxEnv, reset_key
from bcg_envs.gradients.config import BundleConfig
from bcg_envs.gradients.registry import Estimator
from bcg_envs.mujoco_backend.contact_log import ContactLog
from bcg_envs.mujoco_backend.jacobians import Stepper
from bcg_envs.mujoco_backend.simulation import FULL_STATE, EnvCore, TaskModel
from bcg_envs.mujoco_backend.task_spec import TaskSpec
from bcg_envs.physics import divergence


def task_spec(env_name: str, env_kwargs: Dict[str, Any], jax_env: Optional[MjxEnv] = None) -> TaskSpec:
    """The ``TaskSpec`` of ``jax_env`` (then ``env_kwargs`` must be empty) or of ``env_name``
    made from ``env_kwargs``."""
    if jax_env is None:
        return TaskSpec.make(env_name, env_kwargs)
    if env_kwargs:
        raise ValueError(f"give either jax_env or env keyword arguments, not both (got {sorted(env_kwargs)})")
    return TaskSpec.from_env(env_name, jax_env)


def env_task(task: TaskModel) -> TaskModel:
    """The ``TaskModel`` one env steps: ``task`` itself, or with ``randomize="episode"`` the
    task on the env's own copy of the model, into which each reset writes the episode's
    fields (the JAX env's model and the other envs' stay as they are)."""
    return task if task.spec.draw_model is None else task.with_model(copy.copy(task.model))


class MujocoSimulation:
    """One env of a task stepped in MuJoCo C (float64), the task logic traced from the
    task's pure functions (``TaskSpec``)."""

    def __init__(self, env_name: str, env_kwargs: Dict[str, Any], jax_env: Optional[MjxEnv] = None) -> None:
        self.spec = task_spec(env_name, env_kwargs, jax_env)
        #: The task (a JAX env) the functions belong to: the Gymnasium env's ``jax_env``.
        self.jax_env: MjxEnv = self.spec.task
        self._started = False

    # The compiled task program and the stepper are built at first use: compiling starts
    # JAX's runtime, which a process must not have started before it forks workers
    # (Gymnasium's AsyncVectorEnv builds one env in its parent to read the spaces).
    @functools.cached_property
    def task(self) -> TaskModel:
        return TaskModel(self.spec)

    @functools.cached_property
    def core(self) -> EnvCore:
        return EnvCore(env_task(self.task))

    @functools.cached_property
    def stepper(self) -> Stepper:
        return Stepper(self.core.s)

    @property
    def default_estimator(self) -> Estimator:
        return self.stepper.default_estimator

    @property
    def model(self) -> mujoco.MjModel:
        """The ``mujoco.MjModel`` simulated (contact stiffness applied; with
        ``randomize="episode"``, the current episode's fields)."""
        return self.core.s.model

    @property
    def data(self) -> mujoco.MjData:
        """The live ``mujoco.MjData``."""
        return self.core.d

    def reset(self, rng: np.random.Generator):
        key = reset_key(rng)
        qpos, qvel, task_info = jax.device_get(self.task.reset_fn(key))
        core = self.core
        core.episode = int(rng.integers(0, 2**31 - 1))
        core.load(np.asarray(qpos, np.float64), np.asarray(qvel, np.float64), None, self.task.new_info(task_info))
        obs = core.reset_outputs()
        self._started = True
        return obs, core.info_dict()

    def step(self, action: np.ndarray):
        stepper = self.stepper
        if stepper.fused:  # ``Stepper.step``'s fused case, one call less
            return self.core.plain_step(action, stepper)
        return stepper.step(self.core, action)

    def grad_step(self, action: np.ndarray, estimator: Estimator, bundle: Optional[BundleConfig]):
        """``step`` plus the step's Jacobians from finite differences in MuJoCo C."""
        (obs, reward, done, truncated), jac = self.stepper.grad_step(self.core, action, estimator, bundle)
        return obs, reward, done, truncated, self.core.info_dict(), jac

    def get_state(self):
        return self.core.get_state()

    def set_state(
        self, qpos: np.ndarray, qvel: np.ndarray, act: Optional[np.ndarray], step: Optional[int] = None
    ) -> None:
        """Fresh data at (qpos, qvel, act) with the episode's task info; ``step`` (None:
        kept) sets the episode step counter."""
        core = self.core
        core.load(qpos, qvel, act, core.info)
        if step is not None:
            core.set_step(step)
        core.reset_outputs()

    def task_info(self):
        return self.core.info if self._started else None

    def close(self) -> None:
        if "task" in self.__dict__:
            self.task.close()


class MujocoBatchSimulation:
    """``num_envs`` copies stepped together by ``mujoco.rollout``, with same-step autoreset.

    The task functions run once per step for the whole batch (one vmapped jit call).
    With ``randomize="episode"`` every env steps its own copy of the model, redrawn at each
    of its resets; ``mujoco.rollout`` takes one model per env.
    """

    def __init__(self, env_name: str, num_envs: int, env_kwargs: Dict[str, Any]) -> None:
        self.task = TaskModel(task_spec(env_name, env_kwargs))
        self.jax_env: MjxEnv = self.task.spec.task
        self.num_envs = num_envs
        self.cores = [EnvCore(env_task(self.task)) for _ in range(num_envs)]
        self.stepper = Stepper(self.task)
        #: Each env's stepper, on its own model where it has one.
        self.steppers = [self.stepper if core.s is self.task else Stepper(core.s) for core in self.cores]
        self._models = None if self.task.spec.draw_model is None else [core.s.model for core in self.cores]
        self.default_estimator = self.stepper.default_estimator
        self.np_random: Optional[np.random.Generator] = None  # the vector env's, from reset

    @property
    def model(self) -> mujoco.MjModel:
        return self.task.model

    def reset(self, rng: np.random.Generator):
        self.np_random = rng
        base = int(rng.integers(0, 2**31 - 1))
        keys = jax.random.split(jax.random.PRNGKey(base), self.num_envs)
        self._load(np.arange(self.num_envs), keys)
        obs = self._observe_all(np.arange(self.num_envs))
        return obs, self._infos()

    def _load(self, idx: np.ndarray, keys) -> None:
        qpos, qvel, task_info = jax.device_get(self.task.reset_batch(keys))
        for j, i in enumerate(idx):
            core = self.cores[i]
            core.episode = int(self.np_random.integers(0, 2**31 - 1))
            ti = {k: np.asarray(v[j]) for k, v in task_info.items()}
            core.load(np.asarray(qpos[j], np.float64), np.asarray(qvel[j], np.float64), None, self.task.new_info(ti))

    def _observe_all(self, idx) -> np.ndarray:
        p = self.task.program
        packs = [
            p.pack(self.cores[i].leaves, np.zeros(p.nu, np.float32), self.cores[i].leaves, self.cores[i].info)
            for i in idx
        ]
        out = p(np.stack([x[0] for x in packs]), np.stack([x[1] for x in packs]), batched=True)
        obs, *_ = p.unpack(out)
        for j, i in enumerate(idx):
            self.cores[i].obs = obs[j]
        return obs

    def step(self, actions: np.ndarray):
        s = self.task
        m = s.model
        est = self.stepper.default_estimator
        cfg = self.stepper.config(None, est)
        clipped = np.clip(actions, -1.0, 1.0).astype(np.float32)
        u = np.stack([s.physics_action(clipped[i], core.info) for i, core in enumerate(self.cores)])
        ctrl = s.action_map(u)
        n = self.num_envs
        starts = np.empty((n, s.nstate))
        warm = np.empty((n, s.nv))
        for i, core in enumerate(self.cores):
            mujoco.mj_getState(m, core.d, starts[i], FULL_STATE)
            warm[i] = core.d.qacc_warmstart
        rolled = s.run_rollout(starts, ctrl, warm, self._models)
        # A rollout stops advancing time where MuJoCo reset a diverging state.
        h = m.opt.timestep
        end_ok = np.abs(rolled[:, -1, 0] - (starts[:, 0] + s.n_substeps * h)) < 0.5 * h
        diverged = ~end_ok | divergence.diverged(*s.state_parts(rolled[:, -1]))
        mean = cfg.forward == "mean" and est.samples
        p = s.program
        fv = np.empty((n, p.nf), np.float32)
        iv = np.empty((n, p.ni), np.int32)
        for i, core in enumerate(self.cores):
            core.begin()
            if diverged[i]:
                log = ContactLog()
            else:
                log = core.replay(ctrl[i], rolled[i], starts[i], warm[i])
            trig, window = core.trigger(est, cfg, log)
            if mean and trig and not diverged[i]:
                stepper = self.steppers[i]
                stepper.mean_forward(core, starts[i], warm[i], u[i], est, cfg, log, stepper.rng(core, cfg))
            prev = core.finish(bool(diverged[i]), log, trig, window, clipped[i])
            fv[i], iv[i] = p.pack(prev, clipped[i], core.leaves, core.info)
        obs, reward, done, metrics, updates = p.unpack(p(fv, iv, batched=True))
        for i, core in enumerate(self.cores):
            core.obs = obs[i]
            core.metrics = {k: x[i] for k, x in metrics.items()}
            core.info.update({k: (x[i].item() if x[i].ndim == 0 else x[i]) for k, x in updates.items()})
            core.info["truncated"] = core.info["step"] >= s.episode_length
        return self._outputs(reward, done)

    def grad_step(self, actions: np.ndarray, estimator: Estimator, bundle: Optional[BundleConfig]):
        """Batched ``grad_step`` (a loop over the envs): every Jacobian gets a leading ``num_envs`` axis."""
        results, jacs = [], []
        for i, core in enumerate(self.cores):
            res, jac = self.steppers[i].grad_step(core, actions[i], estimator, bundle)
            results.append(res)
            jacs.append(jac)
        reward = np.array([r[1] for r in results], np.float32)
        done = np.array([r[2] for r in results])
        out = self._outputs(reward, done)
        jac = Jacobians(*(np.stack([getattr(j, f) for j in jacs]) for f in Jacobians._fields))
        return (*out, jac)

    def _outputs(self, reward: np.ndarray, done: np.ndarray):
        """Batched step outputs with same-step autoreset (core obs/info already updated)."""
        trunc = np.array([bool(c.info["truncated"]) for c in self.cores]) & ~done
        infos = self._infos()
        final_obs = np.stack([c.obs for c in self.cores])
        ended = done | trunc
        if np.any(ended):
            idx = np.flatnonzero(ended)
            keys = jax.random.split(reset_key(self.np_random), idx.size)
            self._load(idx, keys)
            self._observe_all(idx)
        infos["final_obs"] = final_obs
        infos["_final_obs"] = ended
        obs = np.stack([c.obs for c in self.cores])
        return obs, reward, done, trunc, infos

    def _infos(self) -> Dict[str, Any]:
        """Batched info with MJX's dtypes (int32 counters, float32 values)."""
        dicts = [c.info_dict() for c in self.cores]
        dtypes = self.task.info_dtypes
        return {k: np.asarray([d[k] for d in dicts], dtype=dtypes.get(k)) for k in dicts[0]}

    def close(self) -> None:
        self.task.close()
