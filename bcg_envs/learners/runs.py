"""Training runs on disk: ``train_run`` writes a run folder, ``evaluate_run`` reads it.

A run folder holds

* ``config.json``: env id, algorithm, estimator, budget, seed, the learner's settings
  (everything needed to rebuild the policy) and the observation/action sizes;
* ``params.msgpack``: the trained parameters (flax msgpack of numpy arrays);
* ``progress.csv`` (and TensorBoard events): the learner's log;
* ``metrics.json``: the final metrics; ``checkpoints/``: resumable training states.

These back the CLI: ``bcg-envs train --env BoxPush-v0 --algo shac --estimator bcg --steps N
--seed S --out runs/NAME`` and ``bcg-envs evaluate --run runs/NAME [--video out.mp4]``.
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path
from typing import Any, Dict, Optional, Union

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from bcg_envs.envs.evaluation import episode
from bcg_envs.learners import shac
from bcg_envs.registry import short_name
from bcg_envs.stats import success_summary

ALGOS = ("shac",)

#: Per-task learner settings ``train_run`` uses unless the caller overrides them. The
#: paper's SHAC settings (``shac.train``'s defaults) target a 29-DoF humanoid; on the small
#: BoxPush task on CPU these were measured to learn (16x16 rollouts: eval return -94 ->
#: about -58 within 120 iterations, seeds 0 and 1; gamma 0.99 or actor lr 5e-3 learned
#: slower or less reliably).
TASK_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "BoxPush-v0": dict(
        num_envs=16,
        horizon=16,
        gamma=0.95,
        actor_lr=2e-3,
        actor_hidden=(64, 64),
        critic_hidden=(64, 64),
    ),
}

#: ``shac.train`` arguments not recorded in config.json (the budget is ``steps``).
_NOT_SAVED = ("progress_fn", "num_timesteps", "total_steps", "devices", "program_cache")

#: Learner settings that shape the policy network (needed to rebuild it).
_POLICY_KEYS = ("actor_hidden", "activation", "layer_norm", "normalize_observations")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _defaults(fn) -> Dict[str, Any]:
    return {
        name: p.default
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind == p.KEYWORD_ONLY and p.default is not inspect.Parameter.empty
    }


def train_run(
    env_id: str,
    *,
    algo: str = "shac",
    estimator: str = "bcg",
    steps: int,
    seed: int = 0,
    out_dir: Union[str, Path],
    **kwargs: Any,
) -> Dict[str, Any]:
    """Train ``algo`` on ``env_id`` for ``steps`` env steps and write the run to ``out_dir``.

    ``kwargs`` go to the learner (``shac.train``: ``num_envs``, ``horizon``, ``actor_lr``,
    ``restore_from``, ...) over ``TASK_DEFAULTS[env_id]``. By default checkpoints go to
    ``out_dir/checkpoints`` and the log to ``out_dir``. Returns the final metrics (also
    written to ``metrics.json``). Bad arguments (``ValueError``/``TypeError``) are refused
    before ``out_dir`` is created; a folder created here that the learner then refuses
    (before it wrote anything but ``config.json``) is removed again. With several processes
    (``jax.distributed``) every process calls this with the same arguments; process 0
    alone writes the run folder.
    """
    # Every input is checked, and the env built, before the run folder is created.
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {algo!r}")
    if steps is None or isinstance(steps, bool) or int(steps) < 1:
        raise ValueError(f"steps must be a positive integer (env steps), got {steps!r}")
    from bcg_envs.gradients.config import check_estimator

    check_estimator(estimator)
    name = short_name(env_id)  # ValueError naming the registered ids
    accepted = set(_defaults(shac.train)) - {"num_timesteps", "total_steps", "estimator", "seed"}
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise TypeError(f"unknown learner keyword(s) {unknown}: give shac.train keywords, {sorted(accepted)}")
    kwargs = {**TASK_DEFAULTS.get(name, {}), **kwargs}
    env = shac.make_env(env_id, kwargs.get("bundle"))
    out = Path(out_dir)
    lead = jax.process_index() == 0
    created = lead and not out.exists()
    if lead:
        out.mkdir(parents=True, exist_ok=True)
    kwargs.setdefault("log_dir", out)
    kwargs.setdefault("checkpoint_dir", out / "checkpoints")
    settings = {**_defaults(shac.train), **kwargs, "estimator": estimator, "seed": int(seed)}
    config = {
        "env_id": name,
        "algo": algo,
        "estimator": estimator,
        "steps": int(steps),
        "seed": int(seed),
        "observation_size": int(env.observation_size),
        "action_size": int(env.action_size),
        "episode_length": int(env.episode_length),
        "learner": _jsonable({k: v for k, v in settings.items() if k not in _NOT_SAVED}),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if lead:
        (out / "config.json").write_text(json.dumps(config, indent=2))
    try:
        _, params, metrics = shac.train(env, num_timesteps=int(steps), estimator=estimator, seed=int(seed), **kwargs)
    except BaseException:
        # A learner setting it refused (or an interrupt during its compile) leaves no run:
        # remove the folder made here if it holds only config.json.
        if created and [p.name for p in out.iterdir()] == ["config.json"]:
            (out / "config.json").unlink()
            out.rmdir()
        raise
    metrics = {k: _jsonable(v) for k, v in metrics.items()}
    if lead:
        (out / "params.msgpack").write_bytes(flax.serialization.msgpack_serialize(_to_numpy(params)))
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def _to_numpy(tree):
    return jax.tree.map(np.asarray, tree)


def load_run(run_dir: Union[str, Path]):
    """``(config, params, make_policy)`` of a run folder."""
    run = Path(run_dir)
    config_path, params_path = run / "config.json", run / "params.msgpack"
    for path in (config_path, params_path):
        if not path.exists():
            raise FileNotFoundError(f"{run} is not a finished run: {path.name} is missing")
    config = json.loads(config_path.read_text())
    params = flax.serialization.msgpack_restore(params_path.read_bytes())
    learner = config["learner"]
    make_policy = shac.make_inference_fn(config["action_size"], **{k: learner[k] for k in _POLICY_KEYS if k in learner})
    return config, params, make_policy


def evaluate_run(
    run_dir: Union[str, Path],
    *,
    episodes: int = 16,
    video: Optional[Union[str, Path]] = None,
    sim: str = "mjx",
    seed: int = 0,
    episode_length: Optional[int] = None,
) -> Dict[str, float]:
    """Run the run's deterministic policy for ``episodes`` full episodes.

    ``sim="mjx"`` rolls all episodes at once in a jitted ``lax.scan`` on the JAX env;
    any other value (``"mujoco"``) steps the Gymnasium env with ``backend=sim`` one step
    at a time. ``video`` writes the first episode as an mp4 (imageio) rendered by the
    Gymnasium env (``render_mode="rgb_array"``). Returns ``mean_return``, ``std_return``,
    ``mean_length``, ``episodes`` and ``success_rate`` (episodes whose last step reports
    ``info["is_success"]``) with its 95 % Wilson interval ``success_low``/``success_high``.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    config, params, make_policy = load_run(run_dir)
    policy = jax.jit(make_policy(params, deterministic=True))
    env_id = config["env_id"]
    if sim == "mjx":
        returns, lengths, successes = _rollout_mjx(env_id, config["estimator"], policy, episodes, seed, episode_length)
    else:
        returns, lengths, successes = _rollout_gym(env_id, policy, episodes, seed, episode_length, backend=sim)
    result = {
        "mean_return": float(np.mean(returns)),
        "std_return": float(np.std(returns)),
        "mean_length": float(np.mean(lengths)),
        "episodes": int(episodes),
        **success_summary(successes),
    }
    if video is not None:
        path = _record(env_id, policy, video, seed, episode_length, backend=sim)
        result["video"] = str(path)
    return result


def _rollout_mjx(env_id, estimator, policy, episodes, seed, episode_length):
    env = shac.make_env(env_id)  # the estimator does not change the forward pass
    length = int(episode_length or env.episode_length)

    @jax.jit
    def rollout(key):
        state = jax.vmap(env.reset)(jax.random.split(key, episodes))

        def body(carry, _):
            state, alive, ret, steps, success = carry
            action, _ = policy(state.obs, key)
            nxt = jax.vmap(env.step)(state, action)
            ret = ret + jnp.where(alive, nxt.reward, 0.0)
            steps = steps + alive.astype(jnp.int32)
            success = jnp.where(alive, nxt.info["is_success"], success)  # the episode's last step
            alive = alive & (nxt.done <= 0) & ~nxt.info["truncated"]
            return (nxt, alive, ret, steps, success), None

        init = (
            state,
            jnp.ones((episodes,), bool),
            jnp.zeros((episodes,)),
            jnp.zeros((episodes,), jnp.int32),
            jnp.zeros((episodes,), bool),
        )
        (_, _, ret, steps, success), _ = jax.lax.scan(body, init, None, length=length)
        return ret, steps, success

    ret, steps, success = rollout(jax.random.PRNGKey(seed))
    return np.asarray(ret), np.asarray(steps), np.asarray(success)


def _gym_env(env_id, backend, render_mode=None):
    import gymnasium

    import bcg_envs  # noqa: F401  (registers the ids)
    from bcg_envs.registry import NAMESPACE

    return gymnasium.make(f"{NAMESPACE}/{env_id}", backend=backend, render_mode=render_mode)


def _numpy_policy(policy, seed: int):
    """The jitted deterministic JAX policy as observation -> action (NumPy)."""
    key = jax.random.PRNGKey(seed)
    return lambda obs: np.asarray(policy(jnp.asarray(obs), key)[0])


def _rollout_gym(env_id, policy, episodes, seed, episode_length, backend):
    env = _gym_env(env_id, backend)
    try:
        results = [
            episode(env, _numpy_policy(policy, seed + i), seed + i, episode_length or None) for i in range(episodes)
        ]
    finally:
        env.close()
    returns, lengths, successes = (np.array(x) for x in zip(*results))
    return returns, lengths, successes


def _record(env_id, policy, video, seed, episode_length, backend):
    import imageio

    env = _gym_env(env_id, backend, render_mode="rgb_array")
    frames: list = []
    try:
        episode(env, _numpy_policy(policy, seed), seed, episode_length or None, frames)
        fps = env.metadata.get("render_fps", 25)
    finally:
        env.close()
    path = Path(video)
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimsave(str(path), frames, fps=fps)
    return path


def sim_to_sim_run(
    run_dir: Union[str, Path], *, episodes: int = 5, seed: int = 0, episode_length: Optional[int] = None
) -> Dict[str, Any]:
    """Transfer check of a run's deterministic policy from MJX to MuJoCo C.

    G1 tracking runs get ``bcg_envs.sim2sim.sim_to_sim``: for both simulators the
    success rate, falls, clips completed, mean key-body position error (cm), mean joint
    error (rad) and foot penetration, plus ``table`` (``format_sim_to_sim``); any other env
    gets ``evaluate_run`` in both simulators side by side (``{"mjx": ..., "mujoco": ...}``).
    """
    config, params, make_policy = load_run(run_dir)
    env_id = config["env_id"]
    if short_name(env_id).startswith("G1"):
        from bcg_envs.sim2sim import format_sim_to_sim, sim_to_sim

        policy = jax.jit(make_policy(params, deterministic=True))
        key = jax.random.PRNGKey(seed)
        act = lambda obs: np.asarray(policy(jnp.asarray(obs), key)[0])  # noqa: E731
        result = sim_to_sim(env_id, act, episodes=episodes, seed=seed, max_steps=episode_length)
        result["table"] = format_sim_to_sim(result).splitlines()
        return result
    return {
        sim: evaluate_run(run_dir, episodes=episodes, seed=seed, sim=sim, episode_length=episode_length)
        for sim in ("mjx", "mujoco")
    }
