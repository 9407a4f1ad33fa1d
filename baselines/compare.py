"""Derivative-free vs first-order learning, every algorithm scored by one protocol.

    python -m baselines.compare --env BoxPush-v0 --steps 200000 --seeds 0 1 2 \
        --algos sb3_ppo brax_ppo shac_exact shac_bcg brax_apg --out runs/BoxPush-v0

The protocol. At each evaluation point, every algorithm's policy is run by the same code
(``evaluate``): its deterministic action (the Gaussian's mean; SB3's
``deterministic=True``), on the Gymnasium env on the MuJoCo C backend, for the same
``EVAL_EPISODES`` episodes (reset seeds ``EVAL_SEED``, ``EVAL_SEED + 1``, ...) whatever the
algorithm and training seed. It scores the success rate (episode-end
``info["is_success"]``), the return and the episode length. Every learner normalizes its
observations (SB3 through ``VecNormalize``, frozen at evaluation; Brax and SHAC through
their own running statistics). Wall-clock counts training only, not these evaluations.
Brax APG exposes no policy during training, so only its final policy is scored.

A config's optional ``env_kwargs`` (e.g. ``{"contact_stiffness": 0.002, "physics_dt":
0.001}``) go to every env of the run, training and evaluation alike, so all algorithms
learn and are scored on the same physics. Under ``contact_model="penalty"`` (an MJX-only
model) the evaluation and SB3 PPO run on the MJX backend instead of MuJoCo C.

Three x-axes: env steps (transitions the learner consumed), simulated control steps
(``sim_steps``: every control step a simulator ran for training, forward or backward; PPO
simulates one per env step, SHAC and APG the reverse-mode cost of their rollout gradient
with bundle branches counted, ``bcg_envs.gradients.cost``), and training wall-clock.

Each (algorithm, seed) run appends its rows to ``<out>/<algo>_seed<s>.csv`` as they are
measured. Columns: ``env_steps, sim_steps, wall_clock, eval_return, eval_success,
eval_length, eval_episodes``; SHAC's counters ``skipped_updates`` (actor updates skipped
so far because the gradient was non-finite or above ``max_grad_norm``) and
``bundled_fraction`` (training env steps so far whose gradient ``bcg`` bundled), nan for
the other learners; ``cpu_time, others_cpu_time, cpus``, which say whether the wall-clock
is a timing (the run's own CPU seconds, the CPU seconds other processes spent on the CPUs
it could run on, and how many CPUs those were, over training with evaluation left out;
tables show a wall-clock as a timing only where others took at most ``cpu_clock.ALONE`` of them:
pin each job to a core of its own, ``taskset -c 0 python -m baselines.compare ...``);
``train_sim_return, train_sim_success``: at the budget, a learner that trains in another
simulator than the protocol's (``training_backend``) is also scored in its own, on the
same episodes. Columns a CSV predates read as nan.
Long runs resume: a run whose CSV already reaches the budget
is skipped; SB3 PPO and SHAC save a checkpoint under ``<out>/checkpoints/`` at every
evaluation and continue from it (rows after the checkpoint are dropped and measured again;
the wall-clock continues from the last kept row); Brax runs restart. The summary covers the
runs in ``<out>`` that reached the budget and writes ``curves.png`` (whole runs: return vs
env steps, simulated steps and wall-clock; success rate vs env steps; mean +- std over
seeds; the budget dashed) and ``table.md``, where every run is scored at the budget (a
longer run's later rows are left out, so PPO run on to its plateau still compares at equal
env steps; rerun with the longer budget for its own table): final return, final success rate with its
95 % Wilson interval over all seeds' episodes, final episode length, env steps to 90 % of
PPO's final return, env steps to 50 % and 90 % of the best success any algorithm reached
(median over seeds), simulated steps and wall-clock; under it, the gap: PPO's env steps to
those success levels over SHAC's.
"""

from __future__ import annotations

import argparse
import csv
import functools
import inspect
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from baselines import cpu_clock
from bcg_envs.physics.simulator import KAPPA_MODELS
from bcg_envs.stats import format_success, wilson_interval

ALGORITHMS = ("sb3_ppo", "brax_ppo", "shac_exact", "shac_bcg", "brax_apg")
#: Episodes per evaluation, the same for every algorithm (seeds ``EVAL_SEED`` onward).
EVAL_EPISODES = 64
#: First reset seed of the evaluation episodes, far from the small integers the runs train
#: with (``--seeds 0 1 2``), so evaluation episodes are not the training runs' first resets.
EVAL_SEED = 1_000_000
CSV_FIELDS = (
    "env_steps",
    "sim_steps",
    "wall_clock",
    "eval_return",
    "eval_success",
    "eval_length",
    "eval_episodes",
    "skipped_updates",
    "bundled_fraction",
    "cpu_time",
    "others_cpu_time",
    "cpus",
    "train_sim_return",
    "train_sim_success",
)
#: The columns that count things: read back as ints, so a resumed run rewrites them as written.
COUNT_FIELDS = ("env_steps", "eval_episodes")
#: Simulated control steps per env step of the derivative-free learners (a forward step).
FORWARD_ONLY = 1.0
#: A run counts as complete when its last row reaches this fraction of the budget (Brax
#: rounds its step counts to whole batches).
COMPLETE = 0.99
CONFIGS = Path(__file__).resolve().parent / "configs"
Row = Dict[str, float]


def load_config(env_id: str, path: Optional[Path] = None) -> dict:
    """Hyper-parameters per algorithm: ``baselines/configs/<env_id>.json`` or ``path``."""
    path = Path(path) if path else CONFIGS / f"{env_id}.json"
    if not path.exists():
        raise ValueError(f"no baseline config for {env_id!r}; expected {path}")
    return json.loads(path.read_text())


def env_kwargs_of(cfg: dict) -> Dict[str, object]:
    """The config's ``env_kwargs`` (JSON lists as tuples, so the env can be cached)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.get("env_kwargs", {}).items()}


def protocol_backend(env_kwargs: Dict[str, object]) -> str:
    """The Gymnasium backend of evaluation and SB3 PPO: MuJoCo C, or MJX for the penalty
    contact model, which only MJX simulates."""
    return "mjx" if env_kwargs.get("contact_model") in KAPPA_MODELS else "mujoco"


def training_backend(algo: str, env_kwargs: Dict[str, object]) -> str:
    """The simulator an algorithm trains in: SB3 PPO steps the protocol's Gymnasium
    backend, the JAX learners (Brax PPO and APG, SHAC) step MJX."""
    return protocol_backend(env_kwargs) if algo == "sb3_ppo" else "mjx"


#: Env arguments the runners set themselves.
_RUNNER_ENV_ARGS = {"backend", "estimator"}


def config_section(algo: str) -> str:
    """The config section an algorithm reads (both SHAC variants share ``shac``)."""
    return "shac" if algo.startswith("shac") else algo


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
    env_kwargs = env_kwargs_of(cfg)
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


def planned_env_steps(algo: str, cfg: dict, steps: int, evals: int) -> int:
    """The env steps ``algo`` will actually train for with a budget of ``steps`` and
    ``evals`` evaluations: each learner rounds the budget to whole updates. SB3 PPO: whole
    rollouts of ``n_envs x n_steps`` (as ``run_sb3_ppo`` caps ``n_steps``); Brax PPO: per
    evaluation epoch, whole training steps of ``batch_size x num_minibatches x
    unroll_length`` (Brax rounds up, so a batch larger than the budget per evaluation
    multiplies the budget); SHAC: whole iterations of ``num_envs x horizon``; Brax APG:
    whole updates of ``num_envs x horizon_length`` (rounded down)."""
    p = cfg[config_section(algo)]
    if algo == "sb3_ppo":
        n_envs = p.get("n_envs", 1)
        per = n_envs * min(p["n_steps"], max(steps // (2 * n_envs), 16))
        return math.ceil(steps / per) * per
    if algo == "brax_ppo":
        per = p["batch_size"] * p["num_minibatches"] * p.get("unroll_length", 10)
        epochs = max(evals, 1)  # compare passes num_evals = evals + 1
        return epochs * math.ceil(steps / (epochs * per)) * per
    if algo == "brax_apg":
        per = p["num_envs"] * p["horizon_length"]
        return max(1, steps // per) * per
    per = p.get("num_envs", 64) * p.get("horizon", 32)  # shac_*
    return math.ceil(steps / per) * per


def check_budgets(cfg: dict, algos: List[str], steps: int, evals: int, tolerance: float = 0.1) -> Dict[str, int]:
    """Refuse a config under which some algorithm would train for more than ``tolerance``
    off the budget (equal budgets are the protocol); returns the planned env steps."""
    planned = {algo: planned_env_steps(algo, cfg, steps, evals) for algo in algos}
    off = {a: n for a, n in planned.items() if abs(n - steps) > tolerance * steps}
    if off:
        raise ValueError(
            f"unequal budgets: with --steps {steps:,} and --evals {evals} these algorithms would train for "
            f"{ {a: f'{n:,}' for a, n in off.items()} } env steps; choose a budget that is a multiple of their "
            "update sizes or smaller batches in the config (see planned_env_steps)"
        )
    return planned


# ----- the protocol: one evaluation for every algorithm ----------------------------------
def evaluate(
    env_id: str, act: Callable[[np.ndarray], np.ndarray], env_kwargs: Optional[dict] = None, backend: str = ""
) -> Row:
    """Score a policy (observation -> action) on the protocol's episodes: ``EVAL_EPISODES``
    episodes from reset seeds ``EVAL_SEED`` onward, on the protocol's simulator
    (``protocol_backend``) unless ``backend`` names another."""
    from bcg_envs.envs.evaluation import run_episodes

    env_kwargs = env_kwargs or {}
    r = run_episodes(
        env_id,
        act,
        episodes=EVAL_EPISODES,
        seed=EVAL_SEED,
        backend=backend or protocol_backend(env_kwargs),
        env_kwargs=env_kwargs,
    )
    return dict(
        eval_return=r["mean_return"],
        eval_success=r["success_rate"],
        eval_length=r["mean_length"],
        eval_episodes=EVAL_EPISODES,
    )


def jax_policy(make_policy, params) -> Callable[[np.ndarray], np.ndarray]:
    """A Brax-style ``make_policy(params, deterministic=True)`` as observation -> action."""
    import jax
    import jax.numpy as jnp

    policy = jax.jit(make_policy(params, deterministic=True))
    key = jax.random.PRNGKey(0)  # unused by a deterministic policy
    return lambda obs: np.asarray(policy(jnp.asarray(obs), key)[0])


class Recorder:
    """The rows of one run, appended to its CSV as they are measured.

    ``record(env_steps, act, sim_steps)`` scores ``act`` by ``evaluate`` and stamps the row
    with the training wall-clock so far (evaluation time excluded). ``resume_from(steps)``
    keeps the CSV's rows up to ``steps`` (a checkpoint's step count) and continues their
    wall-clock; otherwise the CSV starts empty. ``env_kwargs``: the run's env arguments,
    evaluated on the same physics. With ``budget`` (the run's env steps) and
    ``train_backend`` (the simulator it trains in) other than the protocol's, the last row
    also scores the policy on the same episodes in its own simulator (``train_sim_return``,
    ``train_sim_success``; nan in every other row).
    """

    def __init__(
        self,
        env_id: str,
        path: Optional[Path] = None,
        env_kwargs: Optional[dict] = None,
        *,
        budget: Optional[int] = None,
        train_backend: str = "",
    ) -> None:
        self.env_id = env_id
        self.path = path
        self.env_kwargs = env_kwargs or {}
        self.budget = budget
        own = train_backend and train_backend != protocol_backend(self.env_kwargs)
        self.train_backend = train_backend if own else ""
        self.rows: List[Row] = []
        self._offset = np.zeros(3)  # wall, own CPU, others' CPU of the rows a resumed run kept
        self._meter = cpu_clock.CpuMeter()
        self._started = False  # the CSV is rewritten by the first record or resume_from

    def resume_from(self, env_steps: int) -> None:
        kept = [r for r in read_rows(self.path) if r["env_steps"] <= env_steps] if self.path else []
        self.rows = kept
        if kept:
            self._offset = np.array([kept[-1][k] for k in ("wall_clock", "cpu_time", "others_cpu_time")], float)
        if self.path is not None:
            write_csv(self.path, kept)
        self._started = True

    def record(
        self, env_steps: int, act: Callable[[np.ndarray], np.ndarray], sim_steps: float, **learner: float
    ) -> None:
        """One row: ``act`` scored by ``evaluate`` at ``env_steps``; ``learner`` holds the
        learner's own counters (SHAC's ``skipped_updates``, ``bundled_fraction``)."""
        self._meter.pause()
        wall, own, others = self._offset + np.array(self._meter.totals())
        row = dict(
            env_steps=int(env_steps),
            sim_steps=float(sim_steps),
            wall_clock=float(wall),
            cpu_time=float(own),
            others_cpu_time=float(others),
            cpus=len(self._meter.cpus) or float("nan"),
            **evaluate(self.env_id, act, self.env_kwargs),
            **learner,
        )
        if self.train_backend and self.budget and env_steps >= COMPLETE * self.budget:
            own = evaluate(self.env_id, act, self.env_kwargs, self.train_backend)
            row.update(train_sim_return=own["eval_return"], train_sim_success=own["eval_success"])
        self.rows.append(row)
        if self.path is not None:
            if not self._started:
                write_csv(self.path, [])
            append_row(self.path, row)
        self._started = True
        self._meter.resume()


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
    With ``checkpoint_dir``, the model and the normalizer's statistics are saved at every
    evaluation and a run resumes from them (SB3's ``reset_num_timesteps=False``; the
    rollout buffer and the envs' episodes in flight start afresh)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecNormalize

    import bcg_envs  # noqa: F401

    params = dict(cfg["sb3_ppo"])
    params["learning_rate"] = sb3_learning_rate(params)
    params.pop("lr_schedule", None)
    params.pop("min_lr", None)
    n_envs = params.pop("n_envs", 1)
    normalize = params.pop("normalize_observations", True)
    env_kwargs = env_kwargs_of(cfg)
    venv = make_vec_env(
        f"bcg_envs/{env_id}",
        n_envs=n_envs,
        seed=seed,
        env_kwargs={**env_kwargs, "backend": protocol_backend(env_kwargs)},
    )
    model_path = checkpoint_dir / "model.zip" if checkpoint_dir else None
    stats_path = checkpoint_dir / "vecnormalize.pkl" if checkpoint_dir else None
    resume = model_path is not None and model_path.exists() and (stats_path.exists() or not normalize)
    if normalize:
        env = (
            VecNormalize.load(str(stats_path), venv) if resume else VecNormalize(venv, norm_obs=True, norm_reward=False)
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
        if model_path is not None:
            model_path.parent.mkdir(parents=True, exist_ok=True)
            model.save(str(model_path))
            if normalize:
                env.save(str(stats_path))

    class Eval(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps // every > (self.num_timesteps - n_envs) // every:
                record()
            return True

    params["n_steps"] = min(params["n_steps"], max(steps // (2 * n_envs), 16))
    params["batch_size"] = min(params["batch_size"], params["n_steps"] * n_envs)
    if resume:
        model = PPO.load(str(model_path), env=env, device="cpu")
        recorder.resume_from(model.num_timesteps)
    else:
        model = PPO("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **params)
        record()
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default makes an empty /tmp/SB3-* folder
    remaining = steps - model.num_timesteps
    if remaining > 0:
        model.learn(total_timesteps=remaining, callback=Eval(), reset_num_timesteps=not resume)
    if not recorder.rows or recorder.rows[-1]["env_steps"] != model.num_timesteps:
        record()
    env.close()


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
    evaluation point's policy is scored by the protocol (``policy_params_fn``). No resume:
    an interrupted run starts again."""
    from brax.training.agents.ppo import train as ppo

    from bcg_envs.compat import enable_brax

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
    used). No resume."""
    from brax.training.agents.apg import train as apg

    from bcg_envs.compat import enable_brax
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
        evaluation (about) and a resume from the newest one."""
        nonlocal programs
        from bcg_envs.learners import shac

        if programs is None:
            programs = shac.ProgramCache(maxsize=1)
        env = jax_env_for(env_id, estimator, cfg)
        params = dict(cfg["shac"])
        params["actor_hidden"] = tuple(params["actor_hidden"])
        params["critic_hidden"] = tuple(params["critic_hidden"])
        iterations = max(1, math.ceil(steps / (params.get("num_envs", 64) * params.get("horizon", 32))))
        restore = None
        if checkpoint_dir is not None and any(checkpoint_dir.glob(f"{shac.CHECKPOINT_PREFIX}*")):
            restore = shac.latest_checkpoint(checkpoint_dir)
            recorder.resume_from(int(shac.checkpoint_metadata(restore)["num_steps"]))
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
            checkpoint_every=max(1, iterations // max(evals, 1)),
            restore_from=restore,
            **params,
        )

    return run


RUNNERS = {
    "sb3_ppo": run_sb3_ppo,
    "brax_ppo": run_brax_ppo,
    "shac_exact": _run_shac("exact"),
    "shac_bcg": _run_shac("bcg"),
    "brax_apg": run_brax_apg,
}


# ----- files ------------------------------------------------------------------------------
def write_csv(path: Path, rows: List[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_FIELDS))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, float("nan")) for k in writer.fieldnames})


def append_row(path: Path, row: Row) -> None:
    """One more row of a CSV that ``write_csv`` started (flushed: a killed run keeps it), in
    the columns of that CSV's header (an older CSV keeps its columns)."""
    with path.open() as f:
        fields = next(csv.reader(f))
    with path.open("a", newline="") as f:
        csv.DictWriter(f, fieldnames=fields).writerow({k: row.get(k, float("nan")) for k in fields})


def read_rows(path: Path) -> List[Row]:
    """The rows of one run's CSV, with the columns older CSVs lack: no success or length
    (from before success was scored), 16 evaluation episodes (before the shared protocol),
    no simulated steps (before that axis)."""
    if not path.exists():
        return []

    def parse(key: str, text: str) -> float:
        value = float(text)
        return int(value) if key in COUNT_FIELDS and math.isfinite(value) else value

    with path.open() as f:
        return [
            {
                "eval_success": float("nan"),
                "eval_length": float("nan"),
                "eval_episodes": 16,
                "sim_steps": float("nan"),
                "skipped_updates": float("nan"),
                "bundled_fraction": float("nan"),
                "cpu_time": float("nan"),
                "others_cpu_time": float("nan"),
                "cpus": float("nan"),
                "train_sim_return": float("nan"),
                "train_sim_success": float("nan"),
                **{k: parse(k, v) for k, v in row.items()},
            }
            for row in csv.DictReader(f)
        ]


def read_runs(out_dir: Path, budgets: Optional[Dict[str, int]] = None) -> Dict[str, List[List[Row]]]:
    """algo -> list (over seeds) of rows, from ``<algo>_seed<s>.csv`` files. With
    ``budgets`` (algo -> planned env steps), only runs that reached their algorithm's budget
    (``COMPLETE`` of it): a run still in progress, or stopped early, would pull a final
    score and its interval towards an earlier point of the curve."""
    runs: Dict[str, List[List[Row]]] = defaultdict(list)
    for path in sorted(out_dir.glob("*_seed*.csv")):
        algo = path.stem.rsplit("_seed", 1)[0]
        rows = read_rows(path)
        if not rows:
            continue
        budget = budgets.get(algo) if budgets is not None else None
        if budgets is not None and (budget is None or rows[-1]["env_steps"] < COMPLETE * budget):
            print(
                f"{path.name}: left out of the summary (reaches {rows[-1]['env_steps']:,.0f} env steps of "
                f"{'no known budget' if budget is None else f'{budget:,}'})"
            )
            continue
        runs[algo].append(rows)
    return dict(runs)


def at_budget(runs: Dict[str, List[List[Row]]], budgets: Dict[str, int]) -> Dict[str, List[List[Row]]]:
    """Each run's rows up to its algorithm's budget (1 % slack for rounding): a run longer
    than the budget is scored where the others stop, so a table compares equal env steps and
    a longer run (PPO to its plateau) can share a directory with shorter ones."""
    return {
        algo: [[row for row in rows if row["env_steps"] <= budgets[algo] / COMPLETE] for rows in seeds]
        for algo, seeds in runs.items()
    }


def is_complete(path: Path, steps: int) -> bool:
    """Whether the run's CSV reaches the budget (``COMPLETE`` of ``steps``)."""
    rows = read_rows(path)
    return bool(rows) and rows[-1]["env_steps"] >= COMPLETE * steps


def steps_to_reach(rows: List[Row], target: float, key: str = "eval_return") -> Optional[float]:
    """Env steps of the first row whose ``key`` reaches ``target`` (None if none does)."""
    for row in rows:
        if row[key] >= target:
            return row["env_steps"]
    return None


def median_steps_to(seeds: List[List[Row]], target: float, key: str) -> Tuple[Optional[float], int]:
    """(median over the seeds that reach ``target`` of their env steps to it, how many do)."""
    hits = [h for h in (steps_to_reach(r, target, key) for r in seeds) if h is not None]
    return (float(np.median(hits)) if hits else None), len(hits)


def best_success(runs: Dict[str, List[List[Row]]]) -> float:
    """The highest seed-mean success rate any algorithm reached at any evaluation point."""
    best = 0.0
    for seeds in runs.values():
        by_step: Dict[float, List[float]] = defaultdict(list)
        for rows in seeds:
            for row in rows:
                if not math.isnan(row["eval_success"]):
                    by_step[row["env_steps"]].append(row["eval_success"])
        for values in by_step.values():
            if len(values) == len(seeds):
                best = max(best, float(np.mean(values)))
    return best


def _steps_text(value: Optional[float], hits: int, seeds: int) -> str:
    return f"{value:,.0f} ({hits}/{seeds})" if value is not None else f"— (0/{seeds})"


def _by_wall_clock(rows: List[Row]) -> List[Row]:
    """The rows with their wall-clock as the step axis (for ``median_steps_to``)."""
    return [{**row, "env_steps": row["wall_clock"]} for row in rows]


#: The PPO implementations, in the order their gap lines are written under the table.
PPO_ALGORITHMS = ("sb3_ppo", "brax_ppo")


def summary_table(runs: Dict[str, List[List[Row]]], reference: str = "sb3_ppo") -> str:
    """Markdown: final return (mean +- std over seeds), final success rate with its 95 %
    Wilson interval (all seeds' evaluation episodes pooled; '—' if not recorded),
    final episode length, env steps to 90% of the reference's final return, env steps to
    50 % and 90 % of the best success any algorithm reached (medians over the seeds that
    reach it, how many do), simulated control steps, wall-clock to the end and to the two
    success levels (only where every seed ran alone on its CPUs, ``cpu_clock.ran_alone``: otherwise
    the end's wall-clock is marked "shared" and the levels' are "—"), and the run's own
    CPU time. Under the table, the gap: each PPO's env steps to each success level over
    each SHAC variant's."""
    ref = runs.get(reference) or runs.get("brax_ppo")
    target = None
    if ref:
        ref_final = float(np.mean([r[-1]["eval_return"] for r in ref]))
        # 90% of the way from the worst initial return to the reference's final return.
        initial = min(r[0]["eval_return"] for seeds in runs.values() for r in seeds)
        target = initial + 0.9 * (ref_final - initial)
    best = best_success(runs)
    levels = (0.5, 0.9)
    lines = [
        "| algorithm | seeds | final return | final success [95% CI] | episode length | env steps to 90% of PPO "
        "| env steps to 50% of best success | env steps to 90% of best success | simulated steps | wall-clock (s) "
        "| wall-clock to 50% / 90% of best success (s) | CPU time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    to_success: Dict[str, List[Optional[float]]] = {}
    for algo, seeds in runs.items():
        finals = np.array([r[-1]["eval_return"] for r in seeds])
        wall = np.mean([r[-1]["wall_clock"] for r in seeds])
        alone = cpu_clock.ran_alone(seeds)
        wall_text = f"{wall:.0f}" if alone else f"{wall:.0f} (shared)"
        cpu = np.array([r[-1]["cpu_time"] for r in seeds], float)
        cpu_text = f"{cpu.mean():.0f}" if np.all(np.isfinite(cpu)) else "—"
        wall_cells = []
        reach = "—" if target is None else _steps_text(*median_steps_to(seeds, target, "eval_return"), len(seeds))
        to_success[algo] = []
        success_cells = []
        for level in levels:
            if best > 0:
                value, hits = median_steps_to(seeds, level * best, "eval_success")
                to_success[algo].append(value)
                success_cells.append(_steps_text(value, hits, len(seeds)))
                seconds, _ = median_steps_to([_by_wall_clock(r) for r in seeds], level * best, "eval_success")
                wall_cells.append(f"{seconds:.0f}" if alone and seconds is not None else "—")
            else:
                to_success[algo].append(None)
                success_cells.append("— (no success)")
                wall_cells.append("—")
        success = np.array([r[-1]["eval_success"] for r in seeds])
        episodes = np.array([r[-1]["eval_episodes"] for r in seeds])[~np.isnan(success)]
        success = success[~np.isnan(success)]
        if success.size:
            n = int(np.sum(episodes))
            k = int(round(float(np.sum(success * episodes))))
            low, high = wilson_interval(k, n)
            success_text = format_success({"success_rate": k / n, "success_low": low, "success_high": high})
        else:
            success_text = "—"
        lengths = np.array([r[-1]["eval_length"] for r in seeds])
        length_text = f"{np.nanmean(lengths):.0f}" if np.any(~np.isnan(lengths)) else "—"
        sims = np.array([r[-1]["sim_steps"] for r in seeds])
        sims_text = f"{np.mean(sims):,.0f}" if np.all(~np.isnan(sims)) else "—"
        lines.append(
            f"| {algo} | {len(seeds)} | {finals.mean():.2f} ± {finals.std():.2f} | {success_text} | {length_text} "
            f"| {reach} | {success_cells[0]} | {success_cells[1]} | {sims_text} | {wall_text} "
            f"| {' / '.join(wall_cells)} | {cpu_text} |"
        )
    lines.append("")
    lines.append(f"Best success (seed mean at one evaluation, any algorithm): {100 * best:.1f} %.")
    pairs = [(p, s) for p in PPO_ALGORITHMS if p in runs for s in runs if s.startswith("shac")]
    for ppo_name, algo in pairs if best > 0 else []:
        ratios = []
        for level, ppo, shac_steps in zip(levels, to_success[ppo_name], to_success[algo]):
            if ppo is None or shac_steps is None or shac_steps == 0:
                ratios.append(
                    f"{int(100 * level)} %: — ({ppo_name} {'never' if ppo is None else f'{ppo:,.0f}'}, "
                    f"{algo} {'never' if shac_steps is None else f'{shac_steps:,.0f}'})"
                )
            else:
                ratios.append(f"{int(100 * level)} %: {ppo / shac_steps:.1f}x")
        lines.append(f"Gap, {ppo_name} / {algo} env steps to the best success's " + "; ".join(ratios) + ".")
    return "\n".join(lines)


#: One colour per algorithm, the same in every figure (matplotlib's default cycle, fixed).
ALGORITHM_COLORS = {"sb3_ppo": "C0", "brax_ppo": "C1", "shac_exact": "C2", "shac_bcg": "C3", "brax_apg": "C4"}
#: Line styles of the reference policies' levels (``plot_curves``'s ``references``), by name.
REFERENCE_STYLES = {"do nothing": dict(color="0.35", linestyle=":"), "scripted": dict(color="0.1", linestyle="-.")}


def algorithm_color(algo: str) -> str:
    """The colour of ``algo`` in every figure (grey for a name outside ``ALGORITHM_COLORS``)."""
    return ALGORITHM_COLORS.get(algo, "0.5")


def plot_curves(
    runs: Dict[str, List[List[Row]]],
    path: Path,
    title: str = "",
    budget: Optional[int] = None,
    references: Optional[Dict[str, Tuple[float, float]]] = None,
) -> None:
    """Return against env steps, simulated steps and wall-clock (mean +- std over seeds) and
    success against env steps; whole runs, with the table's ``budget`` (env steps) dashed.
    Each algorithm keeps its ``ALGORITHM_COLORS`` colour; every panel has a legend.
    ``references``: name -> (return, success rate) of fixed policies on the same evaluation
    episodes (do nothing, a scripted controller), drawn as horizontal lines (styles from
    ``REFERENCE_STYLES`` by the name's first words)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 4, figsize=(21, 4.2))
    for algo, seeds in runs.items():
        color = algorithm_color(algo)
        for ax, key in zip(axes, ("env_steps", "sim_steps", "wall_clock")):
            if any(np.isnan(row[key]) for r in seeds for row in r):
                continue  # CSVs from before the simulated-steps axis
            grid = np.linspace(0, min(r[-1][key] for r in seeds), 50)
            curves = np.stack(
                [np.interp(grid, [row[key] for row in r], [row["eval_return"] for row in r]) for r in seeds]
            )
            mean, std = curves.mean(0), curves.std(0)
            ax.plot(grid, mean, color=color, label=f"{algo} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})")
            ax.fill_between(grid, mean - std, mean + std, color=color, alpha=0.2)
        # Success: the evaluations that recorded it (markers; a line where there are several).
        points = [
            (row["env_steps"], row["eval_success"]) for r in seeds for row in r if not np.isnan(row["eval_success"])
        ]
        if points:
            steps_, rates = (np.array(v) for v in zip(*sorted(points)))
            uniq = np.unique(steps_)
            axes[3].plot(
                uniq, [rates[steps_ == u].mean() for u in uniq], marker="o", markersize=3, color=color, label=algo
            )
    for name, (ret, success) in (references or {}).items():
        style = next((s for k, s in REFERENCE_STYLES.items() if name.startswith(k)), dict(color="0.6", linestyle="-"))
        for ax in axes[:3]:
            ax.axhline(ret, linewidth=1, label=f"{name} ({ret:.1f})", **style)
        if not np.isnan(success):
            axes[3].axhline(success, linewidth=1, label=f"{name} ({100 * success:.0f} %)", **style)
    if budget is not None:
        for ax in (axes[0], axes[3]):
            ax.axvline(budget, color="grey", linestyle="--", linewidth=1, label="budget of the table")
    axes[0].set(xlabel="environment steps", ylabel="evaluation return", title=title)
    axes[1].set(xlabel="simulated control steps (forward + backward)", ylabel="evaluation return")
    axes[2].set(xlabel="wall-clock (s)", ylabel="evaluation return")
    axes[3].set(xlabel="environment steps", ylabel="success rate", ylim=(-0.05, 1.05))
    for ax in (axes[0], axes[1], axes[3]):
        ax.xaxis.set_major_formatter(matplotlib.ticker.EngFormatter())  # 50k, not 50000
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def compare(
    env_id: str,
    algos: List[str],
    seeds: List[int],
    steps: int,
    out_dir: Path,
    evals: int = 5,
    config: Optional[Path] = None,
) -> str:
    cfg = load_config(env_id, config)
    validate_config(cfg, env_id, algos)
    planned = check_budgets(cfg, algos, steps, evals)
    out_dir.mkdir(parents=True, exist_ok=True)
    for algo in algos:
        for seed in seeds:
            path = out_dir / f"{algo}_seed{seed}.csv"
            if is_complete(path, planned[algo]):
                print(f"[{env_id}] {algo} seed {seed}: complete in {path}, skipped")
                continue
            print(f"[{env_id}] {algo} seed {seed}: {planned[algo]:,} env steps", flush=True)
            checkpoints = out_dir / "checkpoints" / f"{algo}_seed{seed}"
            kwargs = env_kwargs_of(cfg)
            recorder = Recorder(
                env_id, path, kwargs, budget=planned[algo], train_backend=training_backend(algo, kwargs)
            )
            RUNNERS[algo](env_id, steps, seed, cfg, evals, recorder, checkpoints)
    budgets = {a: planned_env_steps(a, cfg, steps, evals) for a in ALGORITHMS if config_section(a) in cfg}
    runs = read_runs(out_dir, budgets)
    table = summary_table(at_budget(runs, budgets))
    (out_dir / "table.md").write_text(table + "\n")
    plot_curves(runs, out_dir / "curves.png", title=env_id, budget=steps)
    print(table)
    return table


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="BoxPush-v0")
    parser.add_argument("--algos", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--evals", type=int, default=5)
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--config", default=None, help="JSON of hyper-parameters (default: baselines/configs/<env>.json)"
    )
    args = parser.parse_args(argv)
    out = Path(args.out or f"baselines/results/{args.env}")
    compare(args.env, args.algos, args.seeds, args.steps, out, args.evals, args.config)


if __name__ == "__main__":
    main()
