"""Sim-to-sim transfer test: run a policy trained on the MJX env in MuJoCo C.

``sim_to_sim(env, policy)`` rolls the same policy (a callable ``obs -> action`` on NumPy
arrays) out twice per episode from the same reset state:

* in MuJoCo C: ``mujoco.mj_step`` on the env's own ``MjModel`` (same contact stiffness,
  same substeps per control step), with the observation computed by the env's own
  ``observe`` on ``mjx.put_data(model, mj_data)`` (so it cannot drift from the MJX one);
* in MJX: the env's jitted ``step``.

Episodes end after ``episode_length`` control steps (or ``max_steps``) or when the pelvis
falls below ``config["fall_height"]`` (0.3 m; a fall). The env's tracking-error
termination does not end a transfer episode. Reported (see ``sim_to_sim``): falls, mean
tracking error (cm: distance of the key bodies (torso, hands, feet) to the reference,
mean over bodies and steps), and foot penetration depth in both simulators and their
difference.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.envs.g1.base import foot_penetration_numpy

Policy = Callable[[np.ndarray], Any]


def _resolve(env_or_id):
    """(the JAX env, jitted reset, jitted step); reuses a Gym adapter's jitted functions."""
    from bcg_envs.envs.base import MjxEnv

    if isinstance(env_or_id, str):
        from bcg_envs.registry import make_jax

        env = make_jax(env_or_id)
        return env, jax.jit(env.reset), jax.jit(env.step)
    if isinstance(env_or_id, MjxEnv):
        return env_or_id, jax.jit(env_or_id.reset), jax.jit(env_or_id.step)
    inner = getattr(env_or_id, "unwrapped", env_or_id)
    jax_env = getattr(inner, "jax_env", None)
    if isinstance(jax_env, MjxEnv):
        fns = getattr(inner, "_fns", None)
        if fns is not None and not getattr(fns, "batched", True):
            return jax_env, fns.reset, fns.step
        return jax_env, jax.jit(jax_env.reset), jax.jit(jax_env.step)
    raise ValueError(
        f"sim_to_sim needs an env id, a bcg_envs JAX env or a bcg_envs Gym env, got {type(env_or_id).__name__}"
    )


def _act(policy: Policy, obs, nu: int) -> np.ndarray:
    action = np.asarray(policy(np.asarray(obs, dtype=np.float32)), dtype=np.float32).reshape(-1)
    if action.shape != (nu,):
        raise ValueError(f"policy must return an action of shape ({nu},), got {action.shape}")
    if not np.all(np.isfinite(action)):
        raise ValueError("policy returned a non-finite action")
    return np.clip(action, -1.0, 1.0)


def sim_to_sim(
    env_id_or_env: Union[str, Any],
    policy: Policy,
    *,
    episodes: int = 5,
    seed: int = 0,
    max_steps: Optional[int] = None,
) -> Dict[str, Any]:
    """Transfer test of ``policy`` from MJX to MuJoCo C on a G1 tracking env.

    Args:
      env_id_or_env: an env id (``"G1Jump-v0"``), a G1 tracking JAX env (``make_jax``) or
        its Gym adapter (``gym.make``; its jitted step is reused).
      policy: ``obs (np.float32, (nobs,)) -> action (nu,)`` in [-1, 1] (clipped).
      episodes: number of episodes; episode ``i`` resets with ``PRNGKey(seed)`` folded
        with ``i`` (random start phase / reset push only where the env config asks).
      max_steps: cap on control steps per episode (default: the env's episode length).

    Returns a dict:
      ``falls`` (MuJoCo C episodes whose pelvis fell below ``fall_height``), ``falls_mjx``;
      ``tracking_error_cm`` (MuJoCo C) and ``tracking_error_cm_mjx``: mean over key bodies
      and steps of the distance to the reference key-body positions, averaged over episodes;
      ``penetration_mm`` / ``penetration_mm_mjx``: mean over steps of the deepest foot-sphere
      penetration into the floor; ``penetration_diff_mm`` = MuJoCo C minus MJX;
      ``obs_reset_max_abs_diff``: largest difference between the two simulators' first
      observations (a check that both see the same state);
      ``steps`` / ``steps_mjx`` per episode, and ``per_episode`` details.
    """
    if not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be an integer >= 1, got {episodes!r}")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"max_steps must be None or an integer >= 1, got {max_steps!r}")
    env, reset, step = _resolve(env_id_or_env)
    for attr in ("reference", "key_positions", "config"):
        if not hasattr(env, attr):
            raise ValueError(f"sim_to_sim needs a G1 tracking env (missing {attr!r})")
    model = env.mj_model
    nu = env.action_size
    horizon = min(env.episode_length, max_steps or env.episode_length)
    fall_height = float(env.config["fall_height"])
    key_ids = np.asarray(env.key_site_ids)
    ref_key = np.asarray(env.reference.key_pos)
    ref_last = len(env.reference) - 1
    observe = jax.jit(env.observe)
    to_ctrl = jax.jit(env.action_to_ctrl)
    substeps = env.physics.n_substeps

    def ref_key_at(info, t):
        return ref_key[min(int(info["ref_start"]) + t, ref_last)]

    per_episode: List[Dict[str, Any]] = []
    for ep in range(episodes):
        state0 = reset(jax.random.fold_in(jax.random.PRNGKey(seed), ep))
        info0 = {k: v for k, v in state0.info.items()}

        # ---- MJX rollout ------------------------------------------------------------
        state = state0
        err_mjx, pen_mjx, fell_mjx, n_mjx = [], [], False, 0
        for t in range(1, horizon + 1):
            state = step(state, jnp.asarray(_act(policy, state.obs, nu)))
            n_mjx = t
            d = state.data
            err_mjx.append(np.mean(np.linalg.norm(np.asarray(d.site_xpos)[key_ids] - ref_key_at(info0, t), axis=-1)))
            pen_mjx.append(float(np.max(np.asarray(env.foot_penetration(d)))))
            if float(d.qpos[2]) < fall_height or bool(state.info["sim_diverged"]):
                fell_mjx = True
                break

        # ---- MuJoCo C rollout ----------------------------------------------------------
        mj_data = mujoco.MjData(model)
        mj_data.qpos[:] = np.asarray(state0.data.qpos, np.float64)
        mj_data.qvel[:] = np.asarray(state0.data.qvel, np.float64)
        if model.na:
            mj_data.act[:] = np.asarray(state0.data.act, np.float64)
        mujoco.mj_forward(model, mj_data)
        info = dict(info0)
        err_c, pen_c, fell_c, n_c = [], [], False, 0
        obs_diff = float("nan")
        for t in range(horizon):
            info["step"] = jnp.asarray(t, jnp.int32)
            obs = np.asarray(observe(mjx.put_data(model, mj_data), info))
            if t == 0:
                obs_diff = float(np.max(np.abs(obs - np.asarray(state0.obs))))
            mj_data.ctrl[:] = np.asarray(to_ctrl(jnp.asarray(_act(policy, obs, nu))), np.float64)
            for _ in range(substeps):
                mujoco.mj_step(model, mj_data)
            mujoco.mj_forward(model, mj_data)
            n_c = t + 1
            if not (np.all(np.isfinite(mj_data.qpos)) and np.all(np.isfinite(mj_data.qvel))):
                fell_c = True
                break
            err_c.append(np.mean(np.linalg.norm(mj_data.site_xpos[key_ids] - ref_key_at(info0, t + 1), axis=-1)))
            pen_c.append(float(np.max(foot_penetration_numpy(model, mj_data))))
            if mj_data.qpos[2] < fall_height:
                fell_c = True
                break

        per_episode.append(
            {
                "fell": fell_c,
                "fell_mjx": fell_mjx,
                "steps": n_c,
                "steps_mjx": n_mjx,
                "tracking_error_cm": 100.0 * float(np.mean(err_c)) if err_c else float("nan"),
                "tracking_error_cm_mjx": 100.0 * float(np.mean(err_mjx)) if err_mjx else float("nan"),
                "penetration_mm": 1000.0 * float(np.mean(pen_c)) if pen_c else float("nan"),
                "penetration_mm_mjx": 1000.0 * float(np.mean(pen_mjx)) if pen_mjx else float("nan"),
                "obs_reset_max_abs_diff": obs_diff,
            }
        )

    def mean(key):
        return float(np.mean([e[key] for e in per_episode]))

    pen_c, pen_x = mean("penetration_mm"), mean("penetration_mm_mjx")
    return {
        "episodes": episodes,
        "falls": int(sum(e["fell"] for e in per_episode)),
        "falls_mjx": int(sum(e["fell_mjx"] for e in per_episode)),
        "tracking_error_cm": mean("tracking_error_cm"),
        "tracking_error_cm_mjx": mean("tracking_error_cm_mjx"),
        "penetration_mm": pen_c,
        "penetration_mm_mjx": pen_x,
        "penetration_diff_mm": pen_c - pen_x,
        "obs_reset_max_abs_diff": max(e["obs_reset_max_abs_diff"] for e in per_episode),
        "steps": [e["steps"] for e in per_episode],
        "steps_mjx": [e["steps_mjx"] for e in per_episode],
        "per_episode": per_episode,
    }


def hold_pose_policy(nu: int = 29) -> Policy:
    """The PD-hold policy: action 0, i.e. PD targets at the default standing pose."""
    zero = np.zeros(nu, np.float32)
    return lambda obs: zero
