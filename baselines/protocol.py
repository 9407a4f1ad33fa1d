"""The protocol every learner is scored by (see baselines.compare): configs, equal budgets, evaluation, a run's rows."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

from baselines import cpu_clock
from baselines.run_csv import COMPLETE, Row, append_row, read_rows, write_csv
from bcg_envs.physics.simulator import KAPPA_MODELS
from bcg_envs.registry import list_envs, short_name

ALGORITHMS = ("sb3_ppo", "brax_ppo", "shac_exact", "shac_bcg", "brax_apg")
#: Task ids the scripts take as ``--env`` (the registered ids without the namespace).
ENV_IDS = tuple(short_name(env_id) for env_id in list_envs())
#: Episodes per evaluation, the same for every algorithm (seeds ``EVAL_SEED`` onward).
EVAL_EPISODES = 64
#: First reset seed of the evaluation episodes, far from the small integers the runs train
#: with (``--seeds 0 1 2``), so evaluation episodes are not the training runs' first resets.
EVAL_SEED = 1_000_000
CONFIGS = Path(__file__).resolve().parent / "configs"


def load_config(env_id: str, path: Optional[Path] = None) -> dict:
    """Hyper-parameters per algorithm: ``baselines/configs/<env_id>.json`` or ``path``."""
    path = Path(path) if path else CONFIGS / f"{env_id}.json"
    if not path.exists():
        raise ValueError(f"no baseline config for {env_id!r}; expected {path}")
    return json.loads(path.read_text())


def env_kwargs_of(cfg: dict) -> Dict[str, object]:
    """The config's ``env_kwargs``, hashable so that the env can be cached: JSON lists as
    tuples, a ``bundle`` object as a ``BundleConfig`` (e.g. ``{"trigger": "point"}``;
    TypeError names a field it does not have)."""
    from bcg_envs.gradients.config import BundleConfig

    def hashable(v):
        return tuple(v) if isinstance(v, list) else v

    out = {k: hashable(v) for k, v in cfg.get("env_kwargs", {}).items()}
    if isinstance(out.get("bundle"), dict):
        out["bundle"] = BundleConfig(**{k: hashable(v) for k, v in out["bundle"].items()})
    return out


def protocol_backend(env_kwargs: Dict[str, object]) -> str:
    """The Gymnasium backend of evaluation and SB3 PPO: MuJoCo C, or MJX for the kappa
    contact models (``"penalty"``, ``"moreau"``), which only MJX simulates."""
    return "mjx" if env_kwargs.get("contact_model") in KAPPA_MODELS else "mujoco"


def mujoco_contact_kwargs(env_kwargs: Dict[str, object]) -> Dict[str, object]:
    """``env_kwargs`` under MuJoCo's own contact model: the kappa model's keys dropped, so
    the task's default contact and, unless ``physics_dt`` is given, its default physics
    step. The physics a kappa-trained policy transfers to in MuJoCo C."""
    return {k: v for k, v in env_kwargs.items() if k not in ("contact_model", "kappa", "contact_options")}


def training_backend(algo: str, env_kwargs: Dict[str, object]) -> str:
    """The simulator an algorithm trains in: SB3 PPO steps the protocol's Gymnasium
    backend, the JAX learners (Brax PPO and APG, SHAC) step MJX."""
    return protocol_backend(env_kwargs) if algo == "sb3_ppo" else "mjx"


def config_section(algo: str) -> str:
    """The config section an algorithm reads (both SHAC variants share ``shac``)."""
    return "shac" if algo.startswith("shac") else algo


def planned_env_steps(algo: str, cfg: dict, steps: int, evals: int) -> int:
    """The env steps ``algo`` will actually train for with a budget of ``steps`` and
    ``evals`` evaluations: each learner rounds the budget to whole updates. SB3 PPO: whole
    rollouts of ``n_envs x n_steps`` (as ``runners.run_sb3_ppo`` caps ``n_steps``); Brax
    PPO: per evaluation epoch, whole training steps of ``batch_size x num_minibatches x
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
        epochs = max(evals, 1)  # runners.run_brax_ppo passes num_evals = evals + 1
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
    wall-clock; otherwise the CSV starts empty. Every row carries ``resumes``, how many
    times the run had been resumed: a resumed run's clocks also count each new process's
    start-up and compiles, so its wall-clock is not a clean timing (``cpu_clock.ran_alone``).
    ``env_kwargs``: the run's env arguments, evaluated on the same physics. With ``budget``
    (the run's env steps) and ``train_backend`` (the simulator it trains in) other than the
    protocol's, the last row also scores the policy on the same episodes in its own
    simulator (``train_sim_return``, ``train_sim_success``; nan in every other row).
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
        self.resumes = 0
        self._meter = cpu_clock.CpuMeter()
        self._started = False  # the CSV is rewritten by the first record or resume_from

    def resume_from(self, env_steps: int) -> None:
        """Keep the CSV's rows up to a checkpoint's ``env_steps`` and count one more resume.
        Raises ``ValueError`` when the CSV lacks the run's first row (deleted or never
        written): resuming would record a run without its start."""
        kept = [r for r in read_rows(self.path) if r["env_steps"] <= env_steps] if self.path else []
        if self.path is not None and env_steps > 0 and (not kept or kept[0]["env_steps"] != 0):
            start = f"starts at {kept[0]['env_steps']:,} env steps" if kept else "has no rows up to it"
            raise ValueError(
                f"{self.path}: a checkpoint at {env_steps:,} env steps exists, but the CSV {start}; "
                "delete the run's checkpoint directory (<out>/checkpoints/<algo>_seed<seed>) to start it again"
            )
        self.rows = kept
        if kept:
            self._offset = np.array([kept[-1][k] for k in ("wall_clock", "cpu_time", "others_cpu_time")], float)
        # A CSV from before the count: its earlier resumes are unknown, counted as none.
        before = float(kept[-1].get("resumes", math.nan)) if kept else 0.0
        self.resumes = (int(before) if math.isfinite(before) else 0) + 1
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
            resumes=self.resumes,
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
