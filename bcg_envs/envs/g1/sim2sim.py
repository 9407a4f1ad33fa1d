"""Sim-to-sim transfer test: run a policy trained on the MJX env in MuJoCo C.

``sim_to_sim(env, policy)`` rolls the same policy (a callable ``obs -> action`` on NumPy
arrays) out twice per episode from the same reset state:

* in MuJoCo C: ``mujoco.mj_step`` on the env's own ``MjModel`` (same contact stiffness,
  same substeps per control step), with the observation computed by the env's own
  ``observe`` on ``mjx.put_data(model, mj_data)`` (so it cannot drift from the MJX one)
  and the PD targets from the env's ``physics_action`` (residual actions) and
  ``action_to_ctrl``;
* in MJX: the env's jitted ``step``.

``reference_policy(env)`` (replay the reference joint targets) and
``hold_pose_policy(env)`` (stand in the default pose) are scripted baselines for it.

Episodes end after ``episode_length`` control steps (or ``max_steps``) or when the pelvis
falls below ``config["fall_height"]`` (0.3 m; a fall). The env's tracking-error
termination does not end a transfer episode. Reported for both simulators (see
``sim_to_sim``): falls, the per-episode metrics of ``G1Track.update_info`` (mean
key-body position error in cm, i.e. the distance of the key bodies (torso, hands, feet)
to the reference, mean over bodies and steps; mean joint error in rad; clip completed),
the success rate of ``G1Track.success`` and foot penetration depth.
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

    Returns a dict, MuJoCo C first and ``*_mjx`` for MJX:
      ``falls`` / ``falls_mjx``: episodes whose pelvis fell below ``fall_height`` (or whose
      simulation diverged);
      ``tracking_error_cm`` / ``tracking_error_cm_mjx``: mean over key bodies and steps of
      the distance to the reference key-body positions, averaged over episodes;
      ``joint_error_rad`` / ``joint_error_rad_mjx``: mean |q - q_ref| over joints and steps;
      ``completed`` / ``completed_mjx``: episodes whose reference reached its last frame
      without a fall; ``success_rate`` / ``success_rate_mjx``: fraction of episodes that
      ``G1Track.success`` scores at their last step (never when ``max_steps`` cuts the
      episode short of ``episode_length``);
      ``penetration_mm`` / ``penetration_mm_mjx``: mean over steps of the deepest
      foot-sphere penetration into the floor; ``penetration_diff_mm`` = MuJoCo C minus MJX;
      ``obs_reset_max_abs_diff``: largest difference between the two simulators' first
      observations (a check that both see the same state);
      ``steps`` / ``steps_mjx`` per episode, and ``per_episode`` details.
    """
    if not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be an integer >= 1, got {episodes!r}")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"max_steps must be None or an integer >= 1, got {max_steps!r}")
    env, reset, step = _resolve(env_id_or_env)
    for attr in ("reference", "key_positions", "config", "physics_action", "episode_metrics"):
        if not hasattr(env, attr):
            raise ValueError(f"sim_to_sim needs a G1 tracking env (missing {attr!r})")
    model = env.mj_model
    nu = env.action_size
    horizon = min(env.episode_length, max_steps or env.episode_length)
    observe = jax.jit(env.observe)
    to_ctrl = jax.jit(lambda a, info: env.action_to_ctrl(env.physics_action(a, info)))
    update = jax.jit(lambda d, info: env.update_info(d, d, info))
    succeeded = jax.jit(env.success)
    substeps = env.physics.n_substeps

    per_episode: List[Dict[str, Any]] = []
    for ep in range(episodes):
        state0 = reset(jax.random.fold_in(jax.random.PRNGKey(seed), ep))
        info0 = {k: v for k, v in state0.info.items()}

        # ---- MJX rollout ------------------------------------------------------------
        state = state0
        pen_mjx, n_mjx = [], 0
        for t in range(1, horizon + 1):
            state = step(state, jnp.asarray(_act(policy, state.obs, nu)))
            n_mjx = t
            pen_mjx.append(float(np.max(np.asarray(env.foot_penetration(state.data)))))
            if bool(state.info["fell"]):
                break
        info_mjx = state.info

        # ---- MuJoCo C rollout ----------------------------------------------------------
        mj_data = mujoco.MjData(model)
        mj_data.qpos[:] = np.asarray(state0.data.qpos, np.float64)
        mj_data.qvel[:] = np.asarray(state0.data.qvel, np.float64)
        if model.na:
            mj_data.act[:] = np.asarray(state0.data.act, np.float64)
        mujoco.mj_forward(model, mj_data)
        info = dict(info0)
        pen_c, n_c = [], 0
        obs = np.asarray(observe(mjx.put_data(model, mj_data), info))
        obs_diff = float(np.max(np.abs(obs - np.asarray(state0.obs))))
        for t in range(horizon):
            mj_data.ctrl[:] = np.asarray(to_ctrl(jnp.asarray(_act(policy, obs, nu)), info), np.float64)
            for _ in range(substeps):
                mujoco.mj_step(model, mj_data)
            mujoco.mj_forward(model, mj_data)
            n_c = t + 1
            info = dict(info)
            info["step"] = jnp.asarray(t + 1, jnp.int32)
            info["truncated"] = jnp.asarray(t + 1 >= env.episode_length)
            if not (np.all(np.isfinite(mj_data.qpos)) and np.all(np.isfinite(mj_data.qvel))):
                info["fell"] = jnp.asarray(True)  # diverged: counted as a fall, scores nothing
                info["is_success"] = jnp.asarray(False)
                break
            dx = mjx.put_data(model, mj_data)
            info = update(dx, info)
            info["is_success"] = succeeded(dx, info)
            obs = np.asarray(observe(dx, info))
            pen_c.append(float(np.max(foot_penetration_numpy(model, mj_data))))
            if bool(info["fell"]):
                break

        def metrics(i, suffix):
            return {
                f"fell{suffix}": bool(i["fell"]),
                f"completed{suffix}": bool(i["clip_completed"]),
                f"success{suffix}": bool(i["is_success"]),
                f"tracking_error_cm{suffix}": 100.0 * float(i["tracking_error"]),
                f"joint_error_rad{suffix}": float(i["joint_error"]),
            }

        per_episode.append(
            {
                **metrics(info, ""),
                **metrics(info_mjx, "_mjx"),
                "steps": n_c,
                "steps_mjx": n_mjx,
                "penetration_mm": 1000.0 * float(np.mean(pen_c)) if pen_c else float("nan"),
                "penetration_mm_mjx": 1000.0 * float(np.mean(pen_mjx)) if pen_mjx else float("nan"),
                "obs_reset_max_abs_diff": obs_diff,
            }
        )

    def mean(key):
        return float(np.mean([e[key] for e in per_episode]))

    pen_c, pen_x = mean("penetration_mm"), mean("penetration_mm_mjx")
    out: Dict[str, Any] = {"episodes": episodes}
    for suffix in ("", "_mjx"):
        out[f"falls{suffix}"] = int(sum(e[f"fell{suffix}"] for e in per_episode))
        out[f"completed{suffix}"] = int(sum(e[f"completed{suffix}"] for e in per_episode))
        out[f"success_rate{suffix}"] = mean(f"success{suffix}")
        out[f"tracking_error_cm{suffix}"] = mean(f"tracking_error_cm{suffix}")
        out[f"joint_error_rad{suffix}"] = mean(f"joint_error_rad{suffix}")
    out.update(
        penetration_mm=pen_c,
        penetration_mm_mjx=pen_x,
        penetration_diff_mm=pen_c - pen_x,
        obs_reset_max_abs_diff=max(e["obs_reset_max_abs_diff"] for e in per_episode),
        steps=[e["steps"] for e in per_episode],
        steps_mjx=[e["steps_mjx"] for e in per_episode],
        per_episode=per_episode,
    )
    return out


def episode_summary(final_info: Dict[str, Any]) -> Dict[str, Any]:
    """Reported units of the G1 per-episode metrics from the last step's ``info`` of each
    episode (arrays over episodes of ``G1Track.episode_metrics``): ``tracking_error_cm``
    and ``joint_error_rad`` (means over episodes), ``falls`` and ``completed`` (counts)."""
    return {
        "tracking_error_cm": 100.0 * float(np.mean(final_info["tracking_error"])),
        "joint_error_rad": float(np.mean(final_info["joint_error"])),
        "falls": int(np.sum(final_info["fell"])),
        "completed": int(np.sum(final_info["clip_completed"])),
    }


def format_sim_to_sim(result: Dict[str, Any]) -> str:
    """The per-episode metrics of ``sim_to_sim`` as a two-row table (MuJoCo C, MJX)."""
    n = result["episodes"]
    lines = [f"{'simulator':10s} {'success':>8s} {'falls':>7s} {'completed':>10s} {'track err cm':>13s} "
             f"{'joint err rad':>14s} {'penetr. mm':>11s}"]
    for name, sfx in (("MuJoCo C", ""), ("MJX", "_mjx")):
        lines.append(
            f"{name:10s} {result['success_rate' + sfx]:8.2f} {result['falls' + sfx]:>3d} / {n:<2d}"
            f" {result['completed' + sfx]:>5d} / {n:<2d} {result['tracking_error_cm' + sfx]:13.1f}"
            f" {result['joint_error_rad' + sfx]:14.3f} {result['penetration_mm' + sfx]:11.2f}"
        )
    return "\n".join(lines)


def hold_pose_policy(env: Union[int, Any] = 29) -> Policy:
    """PD targets at the default standing pose ("doing nothing" from a standing start).

    ``env``: the action size (absolute actions: action 0) or a G1 tracking env, whose
    residual mode needs the observation (``-(reference pose - default) / residual_scale``,
    clipped to [-1, 1], so the default pose is reached only within the residual range).
    """
    if isinstance(env, int):
        zero = np.zeros(env, np.float32)
        return lambda obs: zero
    env = getattr(env, "unwrapped", env)
    env = getattr(env, "jax_env", env)
    zero = np.zeros(env.action_size, np.float32)
    if env.residual_scale is None:
        return lambda obs: zero
    sl = env.observation_layout()["ref1_joint_pos"]
    scale = np.asarray(env.residual_scale)
    return lambda obs: np.clip(-np.asarray(obs)[sl] / scale, -1.0, 1.0).astype(np.float32)


def reference_policy(env: Any) -> Policy:
    """The scripted tracker: PD targets at the next reference joint pose (open loop).

    Residual mode: action 0. Absolute mode: ``(reference - default) / action_scale``, read
    from the observation's ``ref1_joint_pos`` (reachable: the scale covers the clip).
    """
    env = getattr(env, "unwrapped", env)
    env = getattr(env, "jax_env", env)
    zero = np.zeros(env.action_size, np.float32)
    if env.residual_scale is not None:
        return lambda obs: zero
    sl = env.observation_layout()["ref1_joint_pos"]
    scale = np.asarray(env.action_scale)
    return lambda obs: np.clip(np.asarray(obs)[sl] / scale, -1.0, 1.0).astype(np.float32)
