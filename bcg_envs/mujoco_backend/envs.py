"""``MujocoGymEnv`` and ``MujocoVectorEnv``: the Gymnasium envs of ``backend="mujoco"``."""

from __future__ import annotations

from typing import Any, Dict, Optional

import gymnasium
import jax
import mujoco
import numpy as np

from bcg_envs.envs.base import MAX_QVEL, Jacobians, MjxEnv
from bcg_envs.gradients.config import BundleConfig, check_estimator
from bcg_envs.mujoco_backend.jacobians import Stepper
from bcg_envs.mujoco_backend.simulation import FULL_STATE, ContactLog, EnvCore, TaskModel
from bcg_envs.gym import GradStepResult, TaskEnv, check_action, set_vector_spaces


# ======================================================================================
# Gymnasium environments
# ======================================================================================
class MujocoGymEnv(TaskEnv):
    """A bcg_envs task stepped in MuJoCo C (``gym.make(id, backend="mujoco")``).

    Same spaces, info keys, truncation, reset distribution, divergence handling and
    ``grad_step`` contract as ``bcg_envs.gym.GymEnv``; float64 physics.
    """

    def __init__(self, env_name: str, *, render_mode: Optional[str] = None, width: int = 320, height: int = 240,
                 jax_env: Optional[MjxEnv] = None, **env_kwargs: Any) -> None:
        """``jax_env``: simulate this already-built JAX env of ``env_name`` (its config,
        contact stiffness, timestep) instead of making one from ``env_kwargs``."""
        self._started = False
        self._shared = TaskModel(env_name, env_kwargs, jax_env=jax_env)
        self._setup(env_name, self._shared.jax_env, render_mode, width, height)
        self._core = EnvCore(self._shared)
        self._stepper = Stepper(self._shared)

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
        self._stepper.config(bundle, check_estimator(estimator or self._stepper.default_estimator))
        action = check_action(action, self.action_space.shape)
        (obs, reward, done, truncated), jac = self._stepper.grad_step(self._core, action, estimator, bundle)
        return GradStepResult(obs, reward, done, truncated, self._core.info_dict(), jac)

    def close(self):
        super().close()
        self._shared.close()

    def get_state(self):
        """(qpos, qvel, act) as float64 NumPy arrays."""
        self._require_reset()
        return self._core.get_state()

    def set_state(self, qpos, qvel, act=None) -> None:
        """Set the simulator state; the episode's task info (goal, step count) is kept."""
        qpos, qvel, act = self._checked_state(qpos, qvel, act)
        core = self._core
        core.load(qpos, qvel, act, core.info)
        core.reset_outputs()

    def _task_info(self):
        return self._core.info if self._started else None


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
        self._shared = TaskModel(env_name, env_kwargs)
        self.jax_env: MjxEnv = self._shared.jax_env
        self.num_envs = num_envs
        self.render_mode = None
        set_vector_spaces(self, self.jax_env, num_envs)
        self._cores = [EnvCore(self._shared) for _ in range(num_envs)]
        self._stepper = Stepper(self._shared)
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
        est = self._stepper.default_estimator
        cfg = self._stepper.config(None, est)
        clipped = np.clip(actions, -1.0, 1.0).astype(np.float32)
        u = np.stack([s.physics_action(clipped[i], core.info) for i, core in enumerate(self._cores)])
        ctrl = s.action_map(u)
        n = self.num_envs
        starts = np.empty((n, s.nstate))
        warm = np.empty((n, s.nv))
        for i, core in enumerate(self._cores):
            mujoco.mj_getState(m, core.d, starts[i], FULL_STATE)
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
                log = ContactLog()
            else:
                log = core.replay(ctrl[i], rolled[i], starts[i], warm[i])
            trig, window = core.trigger(est, cfg, log)
            if mean and trig and not diverged[i]:
                self._stepper.mean_forward(core, starts[i], warm[i], u[i], est, cfg, log, self._stepper.rng(core, cfg))
            prev = core.finish(bool(diverged[i]), log, trig, window, clipped[i])
            fv[i], iv[i] = p.pack(prev, clipped[i], core.leaves, core.info)
        obs, reward, done, metrics, updates = p.unpack(p(fv, iv, batched=True))
        for i, core in enumerate(self._cores):
            core.obs = obs[i]
            core.metrics = {k: x[i] for k, x in metrics.items()}
            core.info.update({k: (x[i].item() if x[i].ndim == 0 else x[i]) for k, x in updates.items()})
            core.info["truncated"] = core.info["step"] >= s.episode_length
        return self._outputs(reward, done)

    def grad_step(self, actions, estimator: Optional[str] = None, bundle: Optional[BundleConfig] = None) -> GradStepResult:
        """Batched ``grad_step`` (a loop over the envs): every Jacobian gets a leading ``num_envs`` axis."""
        self._require_reset()
        self._stepper.config(bundle, check_estimator(estimator or self._stepper.default_estimator))
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
