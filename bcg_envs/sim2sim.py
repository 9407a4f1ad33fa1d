"""Sim-to-sim transfer check: one policy in MJX and in MuJoCo C, on the same episodes.

``sim_to_sim(env, policy)`` runs a policy (NumPy observation -> action) on the task's
Gymnasium env of each physics backend: ``GymEnv`` over MJX (float32) and over MuJoCo C
(``backend="mujoco"``, float64), both wrapping the same JAX env (config, contact
stiffness, timestep; ``mujoco_env`` below replaces the MuJoCo C side's) and reset with the
same seeds (``seed + i`` for episode ``i``), so both start from the same state and task
info. Observation, reward, per-episode metrics and success are the task's
own code on both backends; only the simulator differs. A policy trained under a kappa
contact model (``contact_model="penalty"`` or ``"moreau"``, which MuJoCo C does not
simulate) transfers to MuJoCo C with MuJoCo's own contact: pass that env as
``mujoco_env`` (``make_jax(name)``), the sim-to-sim check the BCG paper makes.

Episodes end after ``episode_length`` control steps (or ``max_steps``) or when
``info["fell"]`` (pelvis below ``config["fall_height"]``, or a diverged simulation). The
env's tracking-error termination does not end a transfer episode: the policy keeps acting,
as it would on a robot. Made for the G1 tracking tasks (their ``fell``,
``tracking_error``, ``joint_error`` and ``clip_completed`` metrics and foot penetration).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import mujoco
import numpy as np

from bcg_envs.envs.base import MjxEnv
from bcg_envs.envs.g1.base import foot_penetration_numpy
from bcg_envs.gym import GymEnv
from bcg_envs.physics.simulator import KAPPA_MODELS
from bcg_envs.registry import make_jax, short_name, task_class, task_names

Policy = Callable[[np.ndarray], Any]
#: Per-episode metrics every G1 tracking env reports in its step ``info``.
G1_METRICS = ("fell", "clip_completed", "tracking_error", "joint_error")


def _task(env_or_id: Union[str, MjxEnv, Any]) -> Tuple[str, MjxEnv, Optional[GymEnv]]:
    """(short id, JAX env, the MJX Gym env to reuse or None) of ``sim_to_sim``'s argument."""
    if isinstance(env_or_id, str):
        name = short_name(env_or_id)
        return name, make_jax(name), None
    if isinstance(env_or_id, MjxEnv):
        names = [n for n in task_names() if task_class(n) is type(env_or_id)]
        if not names:
            raise ValueError(f"sim_to_sim: {type(env_or_id).__name__} is not a registered task")
        return names[0], env_or_id, None
    inner = getattr(env_or_id, "unwrapped", env_or_id)
    if isinstance(inner, GymEnv):
        return inner.env_name, inner.jax_env, inner if inner.backend == "mjx" else None
    raise ValueError(
        f"sim_to_sim needs an env id, a bcg_envs JAX env or a bcg_envs Gym env, got {type(env_or_id).__name__}"
    )


def _act(policy: Policy, obs: np.ndarray, nu: int) -> np.ndarray:
    action = np.asarray(policy(np.asarray(obs, dtype=np.float32)), dtype=np.float32).reshape(-1)
    if action.shape != (nu,):
        raise ValueError(f"policy must return an action of shape ({nu},), got {action.shape}")
    if not np.all(np.isfinite(action)):
        raise ValueError("policy returned a non-finite action")
    return np.clip(action, -1.0, 1.0)


def _episodes(env: Any, policy: Policy, episodes: int, seed: int, horizon: int) -> List[Dict[str, Any]]:
    """Run the episodes on one Gym env: per episode the metrics at its last step, the steps
    run, the mean deepest foot penetration (mm) and the first observation."""
    model = env.model
    scratch = mujoco.MjData(model)
    nu = env.action_space.shape[0]
    rows = []
    for ep in range(episodes):
        obs, info = env.reset(seed=seed + ep)
        first_obs, depths, steps = obs, [], 0
        for _ in range(horizon):
            obs, _, _, _, info = env.step(_act(policy, obs, nu))
            steps += 1
            scratch.qpos[:] = env.get_state()[0]
            mujoco.mj_kinematics(model, scratch)
            depths.append(float(np.max(foot_penetration_numpy(model, scratch))))
            if bool(info["fell"]):
                break
        rows.append(
            {
                "fell": bool(info["fell"]),
                "completed": bool(info["clip_completed"]),
                "success": bool(info["is_success"]),
                "tracking_error_cm": 100.0 * float(info["tracking_error"]),
                "joint_error_rad": float(info["joint_error"]),
                "steps": steps,
                "penetration_mm": 1000.0 * float(np.mean(depths)),
                "first_obs": np.asarray(first_obs, np.float64),
            }
        )
    return rows


def sim_to_sim(
    env_id_or_env: Union[str, MjxEnv, Any],
    policy: Policy,
    *,
    episodes: int = 5,
    seed: int = 0,
    max_steps: Optional[int] = None,
    mujoco_env: Optional[MjxEnv] = None,
) -> Dict[str, Any]:
    """Transfer check of ``policy`` from MJX to MuJoCo C on a G1 tracking env.

    Args:
      env_id_or_env: an env id (``"G1Jump-v0"``, default settings), a G1 tracking JAX env
        (``make_jax``) or its MJX Gym env (``gym.make``; reused and reset for the MJX side).
      policy: ``obs (np.float32, (nobs,)) -> action (nu,)`` in [-1, 1] (clipped).
      episodes: number of episodes; episode ``i`` resets both backends with seed ``seed + i``.
      max_steps: cap on control steps per episode (default: the env's episode length).
      mujoco_env: the JAX env whose task and physics MuJoCo C runs (default: the MJX
        side's); required when the MJX side uses a kappa contact model. Same task, same
        episode length.

    Returns a dict, MuJoCo C first and ``*_mjx`` for MJX:
      ``falls`` / ``falls_mjx``: episodes whose pelvis fell below ``fall_height`` (or whose
      simulation diverged);
      ``tracking_error_cm`` / ``tracking_error_cm_mjx``: mean over key bodies and steps of
      the distance to the reference key-body positions, averaged over episodes (an episode
      that fell counts its steps up to the fall, not the rest of the clip);
      ``joint_error_rad`` / ``joint_error_rad_mjx``: mean |q - q_ref| over joints and steps;
      ``tracking_error_cm_no_fall``, ``joint_error_rad_no_fall`` (and ``_mjx``): the same
      over the episodes that did not fall, which ran the whole clip (NaN if every one fell);
      ``completed`` / ``completed_mjx``: episodes whose reference reached its last frame
      without a fall; ``success_rate`` / ``success_rate_mjx``: fraction of episodes the
      task scores a success at their last step (never when ``max_steps`` cuts the episode
      short of ``episode_length``);
      ``penetration_mm`` / ``penetration_mm_mjx``: mean over steps of the deepest
      foot-sphere penetration into the floor; ``penetration_diff_mm`` = MuJoCo C minus MJX;
      ``obs_reset_max_abs_diff``: largest difference between the two backends' first
      observations (a check that both start from the same state);
      ``steps`` / ``steps_mjx`` per episode, and ``per_episode`` details.
    """
    if not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be an integer >= 1, got {episodes!r}")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"max_steps must be None or an integer >= 1, got {max_steps!r}")
    name, jax_env, mjx_gym = _task(env_id_or_env)
    missing = [k for k in G1_METRICS if k not in getattr(jax_env, "episode_metrics", ())]
    if missing:
        raise ValueError(f"sim_to_sim needs a G1 tracking env (its info lacks {missing})")
    horizon = min(jax_env.episode_length, max_steps or jax_env.episode_length)
    c_env = jax_env if mujoco_env is None else mujoco_env
    if not isinstance(c_env, MjxEnv) or type(c_env) is not type(jax_env):
        raise ValueError(
            f"mujoco_env must be a {type(jax_env).__name__} JAX env (make_jax), got {type(c_env).__name__}"
        )
    if c_env.episode_length != jax_env.episode_length:
        raise ValueError(
            f"mujoco_env's episode length ({c_env.episode_length}) differs from the MJX side's "
            f"({jax_env.episode_length})"
        )
    if c_env.contact_model in KAPPA_MODELS:
        raise ValueError(
            f"contact_model={c_env.contact_model!r} runs on MJX only; pass mujoco_env=make_jax({name!r}) "
            "(MuJoCo's contact) for the MuJoCo C side"
        )
    c_gym = GymEnv(name, backend="mujoco", jax_env=c_env)
    own_mjx = mjx_gym is None
    if own_mjx:
        mjx_gym = GymEnv(name, jax_env=jax_env)
    try:
        c_rows = _episodes(c_gym, policy, episodes, seed, horizon)
        mjx_rows = _episodes(mjx_gym, policy, episodes, seed, horizon)
    finally:
        c_gym.close()
        if own_mjx:
            mjx_gym.close()

    per_episode = []
    for c, x in zip(c_rows, mjx_rows):
        row = {k: v for k, v in c.items() if k != "first_obs"}
        row.update({f"{k}_mjx": v for k, v in x.items() if k != "first_obs"})
        row["obs_reset_max_abs_diff"] = float(np.max(np.abs(c["first_obs"] - x["first_obs"])))
        per_episode.append(row)

    out = episode_summary(per_episode)
    out.update(
        penetration_diff_mm=out["penetration_mm"] - out["penetration_mm_mjx"],
        obs_reset_max_abs_diff=max(e["obs_reset_max_abs_diff"] for e in per_episode),
        steps=[e["steps"] for e in per_episode],
        steps_mjx=[e["steps_mjx"] for e in per_episode],
        per_episode=per_episode,
    )
    return out


def episode_summary(per_episode: List[Dict[str, Any]]) -> Dict[str, Any]:
    """``sim_to_sim``'s aggregates of its per-episode rows (keys without a suffix: MuJoCo C;
    ``_mjx``: MJX): fall and completion counts, success rate, and the errors' means over
    every episode and over the episodes that did not fall (``*_no_fall``, NaN if none)."""

    def mean(key: str) -> float:
        return float(np.mean([e[key] for e in per_episode]))

    def mean_no_fall(key: str, suffix: str) -> float:
        values = [e[key + suffix] for e in per_episode if not e["fell" + suffix]]
        return float(np.mean(values)) if values else float("nan")

    out: Dict[str, Any] = {"episodes": len(per_episode)}
    for suffix in ("", "_mjx"):
        out[f"falls{suffix}"] = int(sum(e[f"fell{suffix}"] for e in per_episode))
        out[f"completed{suffix}"] = int(sum(e[f"completed{suffix}"] for e in per_episode))
        out[f"success_rate{suffix}"] = mean(f"success{suffix}")
        for key in ("tracking_error_cm", "joint_error_rad"):
            out[f"{key}{suffix}"] = mean(f"{key}{suffix}")
            out[f"{key}_no_fall{suffix}"] = mean_no_fall(key, suffix)
        out[f"penetration_mm{suffix}"] = mean(f"penetration_mm{suffix}")
    return out


def format_sim_to_sim(result: Dict[str, Any]) -> str:
    """The per-episode metrics of ``sim_to_sim`` as a two-row table (MuJoCo C, MJX)."""
    n = result["episodes"]
    lines = [
        f"{'simulator':10s} {'success':>8s} {'falls':>7s} {'completed':>10s} {'track err cm':>13s} "
        f"{'joint err rad':>14s} {'penetr. mm':>11s}"
    ]
    for name, sfx in (("MuJoCo C", ""), ("MJX", "_mjx")):
        lines.append(
            f"{name:10s} {result['success_rate' + sfx]:8.2f} {result['falls' + sfx]:>3d} / {n:<2d}"
            f" {result['completed' + sfx]:>5d} / {n:<2d} {result['tracking_error_cm' + sfx]:13.1f}"
            f" {result['joint_error_rad' + sfx]:14.3f} {result['penetration_mm' + sfx]:11.2f}"
        )
    return "\n".join(lines)
