"""One runner per learner (``RUNNERS``), each training under the protocol, and the check of a config against them."""

from __future__ import annotations

import functools
import inspect
import math
import os
from pathlib import Path
from typing import Callable, List, Optional, Tuple, Union

import numpy as np

from baselines import resume
from baselines.protocol import ALGORITHMS, Recorder, config_section, env_kwargs_of, jax_policy, protocol_backend
from baselines.run_csv import read_rows

#: Simulated control steps per env step of the derivative-free learners (a forward step).
FORWARD_ONLY = 1.0


#: Env arguments the runners set themselves.
_RUNNER_ENV_ARGS = {"backend", "estimator"}


#: Arguments each runner sets itself: a config that sets them is rejected.
_RUNNER_ARGS = {
    "sb3_ppo": {"self", "policy", "env", "seed", "verbose", "device"},
    "brax_ppo": {
        "environment",
        "num_timesteps",
        "episode_length",
        "num_evals",
        "seed",
        "progress_fn",
        "policy_params_fn",
        "run_evals",
    },
    "shac": {
        "environment",
        "estimator",
        "num_timesteps",
        "total_steps",
        "seed",
        "num_evals",
        "num_eval_envs",
        "progress_fn",
        "progress_bar",
        "policy_params_fn",
        "run_evals",
        "program_cache",
    },
    "brax_apg": {
        "environment",
        "policy_updates",
        "episode_length",
        "num_evals",
        "num_eval_envs",
        "seed",
        "progress_fn",
    },
}
#: Keys a runner reads itself (not passed on) and keys it cannot run without.
_RUNNER_KEYS = {
    "sb3_ppo": {"n_envs", "normalize_observations", "lr_schedule", "min_lr"},
    "brax_ppo": {"init_noise_std"},
}
_REQUIRED = {
    "sb3_ppo": {"n_steps", "batch_size"},
    "shac": {"actor_hidden", "critic_hidden"},
    "brax_apg": {"horizon_length", "num_envs"},
}


def _train_function(section: str) -> Callable:
    if section == "sb3_ppo":
        from stable_baselines3 import PPO

        return PPO.__init__
    if section == "brax_ppo":
        from brax.training.agents.ppo import train as ppo

        return ppo.train
    if section == "brax_apg":
        from brax.training.agents.apg import train as apg

        return apg.train
    from bcg_envs.learners import shac

    return shac.train


def validate_config(cfg: dict, env_id: str, algos: List[str]) -> None:
    """Fail before any compile on a config the runs would reject minutes in: another env's
    config, a missing section, or a key the algorithm's ``train`` does not take."""
    if cfg.get("env", env_id) != env_id:
        raise ValueError(f"config is for env {cfg['env']!r}, not {env_id!r}")
    if not isinstance(cfg.get("env_kwargs", {}), dict):
        raise ValueError(f"config['env_kwargs'] must be a JSON object of env arguments, got {cfg['env_kwargs']!r}")
    try:
        env_kwargs = env_kwargs_of(cfg)
    except (TypeError, ValueError) as err:
        raise ValueError(f"config['env_kwargs']['bundle'] is not a BundleConfig: {err}") from None
    if env_kwargs:
        set_by_runner = sorted(_RUNNER_ENV_ARGS & set(env_kwargs))
        if set_by_runner:
            raise ValueError(f"config['env_kwargs']: {set_by_runner} are set by the runners")
        import bcg_envs

        try:
            bcg_envs.make_jax(env_id, **env_kwargs)
        except (TypeError, ValueError) as err:
            raise ValueError(f"config['env_kwargs'] rejected by {env_id}: {err}") from None
    for algo in algos:
        if algo not in RUNNERS:
            raise ValueError(f"unknown algorithm {algo!r}; choose from {ALGORITHMS}")
        section = config_section(algo)
        params = cfg.get(section)
        if not isinstance(params, dict):
            raise ValueError(f"config has no {section!r} section (a JSON object of {algo}'s hyper-parameters)")
        accepted = set(inspect.signature(_train_function(section)).parameters) - _RUNNER_ARGS[
            section
        ] | _RUNNER_KEYS.get(section, set())
        unknown = sorted(set(params) - accepted)
        if unknown:
            raise ValueError(f"config[{section!r}]: unknown or runner-set keys {unknown}; accepted: {sorted(accepted)}")
        missing = sorted(_REQUIRED.get(section, set()) - set(params))
        if missing:
            raise ValueError(f"config[{section!r}]: missing required keys {missing}")
        if section == "sb3_ppo":
            sb3_learning_rate(params)


def sb3_learning_rate(params: dict) -> Union[float, Callable[[float], float]]:
    """SB3 PPO's ``learning_rate`` from a config section: constant (``lr_schedule``
    ``"constant"``, SB3's default) or ``"linear"`` from ``learning_rate`` down to ``min_lr``
    (default 1e-5) over the run, the schedule SHAC uses, so the two can be compared with the
    same annealing. SB3 calls it with the fraction of the run remaining (1 -> 0); it counts
    across a resume, since SB3 adds the steps already taken to the total."""
    from stable_baselines3.common.utils import LinearSchedule

    lr = params.get("learning_rate", 3e-4)
    schedule = params.get("lr_schedule", "constant")
    if schedule == "constant":
        return lr
    if schedule == "linear":
        return LinearSchedule(start=lr, end=params.get("min_lr", 1e-5), end_fraction=1.0)
    raise ValueError(f"config['sb3_ppo']['lr_schedule'] must be 'constant' or 'linear', got {schedule!r}")


def run_sb3_ppo(
    env_id: str, steps: int, seed: int, cfg: dict, evals: int, recorder: Recorder, checkpoint_dir: Optional[Path] = None
) -> None:
    """stable-baselines3 PPO on ``n_envs`` Gymnasium envs on the MuJoCo C backend (the
    CPU fast path; same model and task code as the JAX env), observations normalized by
    ``VecNormalize`` (``normalize_observations``, default on; rewards left as they are),
    learning rate constant or annealed (``lr_schedule``, see ``sb3_learning_rate``).

    With ``checkpoint_dir``, the model and the normalizer's statistics are saved once the
    rollout of each evaluation has been trained on (at the next rollout's start), so a
    resume starts at a rollout boundary with every update kept; the final evaluation's
    checkpoint is saved before its row, with the policy that row scores. A run resumes from
    them (SB3's ``reset_num_timesteps=False``) only under its own settings (``run.json``,
    ``baselines.resume``). A resumed run is not the uninterrupted one: ``PPO.load`` reseeds
    the global random generators with the run's seed, the envs start fresh episodes from
    the run's reset seeds, and the rollout buffer starts empty."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecNormalize

    import bcg_envs  # noqa: F401

    settings = resume.run_settings("sb3_ppo", env_id, steps, seed, cfg, evals)
    params = dict(cfg["sb3_ppo"])
    params["learning_rate"] = sb3_learning_rate(params)
    params.pop("lr_schedule", None)
    params.pop("min_lr", None)
    n_envs = params.pop("n_envs", 1)
    normalize = params.pop("normalize_observations", True)
    model_path = checkpoint_dir / "model.zip" if checkpoint_dir else None
    stats_path = checkpoint_dir / "vecnormalize.pkl" if checkpoint_dir else None
    resuming = model_path is not None and model_path.exists()
    saved = resume.read_settings(checkpoint_dir) if resuming else None
    if saved is not None:
        resume.check_resume(checkpoint_dir, {k: v for k, v in saved.items() if k != "checkpoint"}, settings)
        _check_sb3_pair(checkpoint_dir, saved.get("checkpoint"))
    elif resuming and normalize and not stats_path.exists():
        resuming = False  # an older checkpoint without its statistics starts afresh, as it always did
    if checkpoint_dir is not None and not resuming:
        for stale in (model_path, stats_path):
            stale.unlink(missing_ok=True)
        resume.write_json(checkpoint_dir / resume.SETTINGS_FILE, settings)

    env_kwargs = env_kwargs_of(cfg)
    venv = make_vec_env(
        f"bcg_envs/{env_id}",
        n_envs=n_envs,
        seed=seed,
        env_kwargs={**env_kwargs, "backend": protocol_backend(env_kwargs)},
    )
    if normalize:
        env = (
            VecNormalize.load(str(stats_path), venv)
            if resuming
            else VecNormalize(venv, norm_obs=True, norm_reward=False)
        )
    else:
        env = venv
    every = max(steps // evals, 1)

    def act(obs: np.ndarray) -> np.ndarray:
        # VecNormalize.normalize_obs reads the running statistics without updating them.
        x = env.normalize_obs(obs) if normalize else obs
        return model.predict(x, deterministic=True)[0]

    def record() -> None:
        recorder.record(model.num_timesteps, act, FORWARD_ONLY * model.num_timesteps)

    def save() -> None:
        """The model and the statistics written to temporary files and moved in place, then
        ``run.json`` records their digests: a run stopped between the moves leaves a pair
        that does not match the record, which a resume refuses."""
        if checkpoint_dir is None:
            return
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        tmp_model, tmp_stats = model_path.with_name("model.zip.tmp"), stats_path.with_name("vecnormalize.pkl.tmp")
        model.save(str(tmp_model))
        if normalize:
            env.save(str(tmp_stats))
        entry = {
            "num_timesteps": int(model.num_timesteps),
            "model_sha256": resume.file_digest(tmp_model),
            "stats_sha256": resume.file_digest(tmp_stats) if normalize else None,
        }
        if normalize:
            os.replace(tmp_stats, stats_path)
        os.replace(tmp_model, model_path)
        resume.write_json(checkpoint_dir / resume.SETTINGS_FILE, {**settings, "checkpoint": entry})

    # due: an evaluation row awaits its rollout's update and checkpoint; end: this rollout's last step
    rollout = {"due": False, "end": 0}

    class Eval(BaseCallback):
        def _on_rollout_start(self) -> None:
            # SB3 trains on a rollout before it starts the next one: the update is in the model now.
            if rollout["due"]:
                save()
                rollout["due"] = False
            rollout["end"] = self.num_timesteps + self.model.n_steps * self.model.n_envs

        def _on_step(self) -> bool:
            if self.num_timesteps // every > (self.num_timesteps - n_envs) // every:
                last = self.num_timesteps == rollout["end"] >= steps  # learning's last step: no update follows
                if last:
                    save()  # the final row's policy, saved first: a resume from it only adds the row
                record()
                rollout["due"] = not last
            return True

    params["n_steps"] = min(params["n_steps"], max(steps // (2 * n_envs), 16))
    params["batch_size"] = min(params["batch_size"], params["n_steps"] * n_envs)
    if resuming:
        model = PPO.load(str(model_path), env=env, device="cpu")
        if saved is None:  # a checkpoint older than run.json: the seed and budget it stores
            stored = {"seed": model.seed, "budget": model._total_timesteps or steps}
            resume.check_resume(checkpoint_dir, stored, {"seed": seed, "budget": steps})
        recorder.resume_from(model.num_timesteps)
    else:
        model = PPO("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **params)
        record()
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default makes an empty /tmp/SB3-* folder
    remaining = steps - model.num_timesteps
    if remaining > 0:
        model.learn(total_timesteps=remaining, callback=Eval(), reset_num_timesteps=not resuming)
    if not recorder.rows or recorder.rows[-1]["env_steps"] != model.num_timesteps:
        save()
        record()
    env.close()


def _check_sb3_pair(checkpoint_dir: Path, record: Optional[dict]) -> None:
    """Raise ``ValueError`` unless ``model.zip`` and ``vecnormalize.pkl`` are the pair that
    ``run.json`` records (a run stopped while saving them leaves a mismatched pair)."""
    files = {"model_sha256": checkpoint_dir / "model.zip", "stats_sha256": checkpoint_dir / "vecnormalize.pkl"}
    if record is None or any(resume.file_digest(path) != record.get(key) for key, path in files.items()):
        raise ValueError(
            f"{checkpoint_dir}: model.zip and vecnormalize.pkl are not the pair its {resume.SETTINGS_FILE} records "
            f"(the run was stopped while saving them); delete {checkpoint_dir} to start the run afresh"
        )


@functools.lru_cache(maxsize=None)
def _jax_env(env_id: str, estimator: str, env_kwargs: Tuple[Tuple[str, object], ...] = ()):
    """One JAX env per (id, estimator, env arguments) in a process, shared by the seeds: a
    second instance of an env lowers to differently numbered MLIR (private function names),
    which misses the persistent compile cache, so every seed after the first would compile
    again."""
    import bcg_envs

    return bcg_envs.make_jax(env_id, estimator=estimator, **dict(env_kwargs))


def jax_env_for(env_id: str, estimator: str, cfg: dict):
    """The run's JAX env: ``estimator``, the config's ``env_kwargs``."""
    return _jax_env(env_id, estimator, tuple(sorted(env_kwargs_of(cfg).items())))


def run_brax_ppo(
    env_id: str, steps: int, seed: int, cfg: dict, evals: int, recorder: Recorder, checkpoint_dir: Optional[Path] = None
) -> None:
    """Brax PPO on the JAX env; its own evaluation is off (``run_evals=False``) and each
    evaluation point's policy is scored by the protocol (``policy_params_fn``). Episodes
    restart from ``env.reset`` at fresh keys (``brax_training_wrapper``), as for the other
    learners. No resume: an interrupted run starts again."""
    from brax.training.agents.ppo import train as ppo

    from bcg_envs.compat import brax_training_wrapper, enable_brax

    enable_brax()

    env = jax_env_for(env_id, "exact", cfg)
    params = dict(cfg["brax_ppo"])
    factory = brax_ppo_network_factory(params.pop("init_noise_std", None))
    if factory is not None:
        params["network_factory"] = factory
    ppo.train(
        environment=env,
        num_timesteps=steps,
        episode_length=env.episode_length,
        num_evals=evals + 1,
        seed=seed,
        run_evals=False,
        wrap_env_fn=brax_training_wrapper,
        policy_params_fn=lambda step, make_policy, params: recorder.record(
            step, jax_policy(make_policy, params), FORWARD_ONLY * step
        ),
        **params,
    )


def brax_ppo_network_factory(init_noise_std: Optional[float]) -> Optional[Callable]:
    """Brax PPO's network factory for the config key ``init_noise_std`` (None: Brax's
    default networks). Brax reads ``init_noise_std`` only for its Gaussian policy
    (``distribution_type="normal"``); its default tanh-normal policy learns the scale as a
    network output (softplus, about 0.69 pre-tanh at initialization) and ignores it. So the
    key selects the Gaussian policy with a state-independent, log-parametrized std starting
    at ``init_noise_std`` on the action scale, as SB3's ``log_std_init`` does (the env
    clips actions to [-1, 1])."""
    if init_noise_std is None:
        return None
    import functools

    from brax.training.agents.ppo import networks as ppo_networks

    if not (isinstance(init_noise_std, (int, float)) and init_noise_std > 0):
        raise ValueError(f"config['brax_ppo']['init_noise_std'] must be a positive number, got {init_noise_std!r}")
    return functools.partial(
        ppo_networks.make_ppo_networks,
        distribution_type="normal",
        noise_std_type="log",
        init_noise_std=float(init_noise_std),
    )


def run_brax_apg(
    env_id: str, steps: int, seed: int, cfg: dict, evals: int, recorder: Recorder, checkpoint_dir: Optional[Path] = None
) -> None:
    """Brax APG on the JAX env (``exact`` gradients). It returns its policy only at the end,
    so its one row is the final policy's score (Brax's own intermediate evaluations are not
    used). Episodes restart from ``env.reset`` (``brax_training_wrapper``). No resume."""
    from brax.training.agents.apg import train as apg

    from bcg_envs.compat import brax_training_wrapper, enable_brax
    from bcg_envs.gradients.cost import simulations_per_step

    enable_brax()

    env = jax_env_for(env_id, "exact", cfg)
    params = dict(cfg["brax_apg"])
    steps_per_update = params["horizon_length"] * params["num_envs"]
    updates = max(1, steps // steps_per_update)
    make_policy, trained, _ = apg.train(
        environment=env,
        policy_updates=updates,
        episode_length=env.episode_length,
        num_evals=1,
        num_eval_envs=1,
        seed=seed,
        wrap_env_fn=brax_training_wrapper,
        **params,
    )
    env_steps = updates * steps_per_update
    recorder.record(
        env_steps,
        jax_policy(make_policy, trained),
        env_steps * simulations_per_step("exact", env.state_size, env.action_size, 0, 0.0),
    )


def _run_shac(estimator: str):
    programs = None  # this runner's shac.ProgramCache: seeds after the first reuse its compiled
    # programs (the same env from _jax_env, the same architecture) instead of tracing again

    def run(
        env_id: str,
        steps: int,
        seed: int,
        cfg: dict,
        evals: int,
        recorder: Recorder,
        checkpoint_dir: Optional[Path] = None,
    ) -> None:
        """SHAC on the JAX env with ``estimator``. Each evaluation point's policy is scored
        by the protocol (its policy from ``policy_params_fn``, recorded by ``progress_fn``
        with SHAC's ``simulated_steps``). With ``checkpoint_dir``, a checkpoint at every
        evaluation, written after its row (``checkpoint_every=0``), and a resume from the
        newest complete one under the run's own settings (``run.json``, or for an older
        checkpoint its stored budget, seed and hyper-parameters). SHAC resumes exactly: the
        resumed rows equal the uninterrupted run's, clocks aside."""
        nonlocal programs
        from bcg_envs.learners import shac

        settings = resume.run_settings(f"shac_{estimator}", env_id, steps, seed, cfg, evals)
        params = dict(cfg["shac"])
        restore = None
        if checkpoint_dir is not None and any(checkpoint_dir.glob(f"{shac.CHECKPOINT_PREFIX}*.msgpack")):
            restore, meta = _shac_restore_point(checkpoint_dir, recorder)
            saved = resume.read_settings(checkpoint_dir)
            if saved is not None:
                resume.check_resume(checkpoint_dir, saved, settings)
            else:  # a checkpoint older than run.json: what its metadata stores
                hyper = sorted(set(params) & set(meta.get("hyper", {})))
                resume.check_resume(
                    checkpoint_dir,
                    {"budget": meta["num_timesteps"], "seed": meta["seed"], **{k: meta["hyper"][k] for k in hyper}},
                    {"budget": steps, "seed": seed, **{k: params[k] for k in hyper}},
                )
            recorder.resume_from(int(meta["num_steps"]))
        elif checkpoint_dir is not None:
            resume.write_json(checkpoint_dir / resume.SETTINGS_FILE, settings)
        if programs is None:
            programs = shac.ProgramCache(maxsize=1)
        env = jax_env_for(env_id, estimator, cfg)
        params["actor_hidden"] = tuple(params["actor_hidden"])
        params["critic_hidden"] = tuple(params["critic_hidden"])
        policy = {}

        def keep_policy(step, make_policy, p):
            policy["act"] = jax_policy(make_policy, p)

        def record(step, metrics):
            bundled = metrics.get("bundled_steps", math.nan) / step if step else 0.0
            recorder.record(
                step,
                policy.pop("act"),
                metrics["simulated_steps"],
                skipped_updates=metrics.get("skipped_updates", math.nan),
                bundled_fraction=bundled,
            )

        shac.train(
            env,
            num_timesteps=steps,
            seed=seed,
            num_evals=evals + 1,
            run_evals=False,
            policy_params_fn=keep_policy,
            progress_fn=record,
            progress_bar=False,
            program_cache=programs,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=0,
            restore_from=restore,
            **params,
        )

    return run


def _shac_restore_point(checkpoint_dir: Path, recorder: Recorder) -> Tuple[Path, dict]:
    """The newest complete SHAC checkpoint (``shac_*.msgpack``; an unfinished ``.tmp`` is
    none) whose evaluation row the CSV holds, and its metadata. Checkpoints follow their
    rows, but older code saved them first: a run stopped while it recorded would resume
    past the lost row, or, stopped at its final evaluation, never write the final row.
    SHAC resumes exactly, so an earlier checkpoint costs time only. Without one, the newest
    (``Recorder.resume_from`` then names what the CSV lacks)."""
    from bcg_envs.learners import shac

    rows = read_rows(recorder.path) if recorder.path is not None else []
    last = rows[-1]["env_steps"] if rows else -1
    found = sorted(checkpoint_dir.glob(f"{shac.CHECKPOINT_PREFIX}*.msgpack"), reverse=True)
    for path in found:
        meta = shac.checkpoint_metadata(path)
        if meta["num_steps"] <= last:
            return path, meta
    return found[0], shac.checkpoint_metadata(found[0])


RUNNERS = {
    "sb3_ppo": run_sb3_ppo,
    "brax_ppo": run_brax_ppo,
    "shac_exact": _run_shac("exact"),
    "shac_bcg": _run_shac("bcg"),
    "brax_apg": run_brax_apg,
}
