"""Derivative-free vs first-order learning on one axis of environment steps.

    python -m baselines.compare --env BoxPush-v0 --steps 200000 --seeds 0 1 2 \
        --algos sb3_ppo brax_ppo shac_exact shac_bcg brax_apg --out baselines/results/BoxPush-v0

Each (algorithm, seed) run writes ``<out>/<algo>_seed<s>.csv`` with columns
``env_steps, wall_clock, eval_return, eval_success, eval_length`` (success: the fraction of
the evaluation episodes whose last step reports ``info["is_success"]``; NaN where the
learner gives no policy to evaluate: Brax APG and SHAC before their final evaluation); the
summary writes ``curves.png`` (return vs env steps and vs wall-clock, success rate vs env
steps; mean +- std over seeds) and ``table.md`` (final return, final success rate with its
95 % Wilson interval over all seeds' episodes, final episode length, env steps to reach
90% of PPO's final return, wall-clock).
"""

from __future__ import annotations

import argparse
import csv
import functools
import inspect
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

from bcg_envs.learners.stats import format_success, wilson_interval
from bcg_envs.utils import single_cpu_client

ALGORITHMS = ("sb3_ppo", "brax_ppo", "shac_exact", "shac_bcg", "brax_apg")
#: Episodes per evaluation of the deterministic policy (Brax PPO: its default 128 envs).
EVAL_EPISODES = 16
CONFIGS = Path(__file__).resolve().parent / "configs"
Row = Dict[str, float]


def load_config(env_id: str, path: Optional[Path] = None) -> dict:
    """Hyper-parameters per algorithm: ``baselines/configs/<env_id>.json`` or ``path``."""
    path = Path(path) if path else CONFIGS / f"{env_id}.json"
    if not path.exists():
        raise ValueError(f"no baseline config for {env_id!r}; expected {path}")
    return json.loads(path.read_text())


def config_section(algo: str) -> str:
    """The config section an algorithm reads (both SHAC variants share ``shac``)."""
    return "shac" if algo.startswith("shac") else algo


#: Arguments each runner sets itself: a config that sets them is rejected.
_RUNNER_ARGS = {
    "sb3_ppo": {"self", "policy", "env", "seed", "verbose", "device"},
    "brax_ppo": {"environment", "num_timesteps", "episode_length", "num_evals", "seed", "progress_fn", "policy_params_fn"},
    "shac": {"environment", "estimator", "num_timesteps", "total_steps", "seed", "num_evals", "num_eval_envs",
             "progress_fn", "progress_bar"},
    "brax_apg": {"environment", "policy_updates", "episode_length", "num_evals", "num_eval_envs", "seed", "progress_fn"},
}
#: Keys a runner reads itself (not passed on) and keys it cannot run without.
_RUNNER_KEYS = {"sb3_ppo": {"n_envs"}}
_REQUIRED = {"sb3_ppo": {"n_steps", "batch_size"}, "shac": {"actor_hidden", "critic_hidden"},
             "brax_apg": {"horizon_length", "num_envs"}}


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
    for algo in algos:
        if algo not in RUNNERS:
            raise ValueError(f"unknown algorithm {algo!r}; choose from {ALGORITHMS}")
        section = config_section(algo)
        params = cfg.get(section)
        if not isinstance(params, dict):
            raise ValueError(f"config has no {section!r} section (a JSON object of {algo}'s hyper-parameters)")
        accepted = (set(inspect.signature(_train_function(section)).parameters) - _RUNNER_ARGS[section]
                    | _RUNNER_KEYS.get(section, set()))
        unknown = sorted(set(params) - accepted)
        if unknown:
            raise ValueError(f"config[{section!r}]: unknown or runner-set keys {unknown}; accepted: {sorted(accepted)}")
        missing = sorted(_REQUIRED.get(section, set()) - set(params))
        if missing:
            raise ValueError(f"config[{section!r}]: missing required keys {missing}")


# ----- runners: each returns rows of (env_steps, wall_clock, eval_return, eval_success, eval_length)
def _row(env_steps, wall_clock, eval_return, eval_success=float("nan"), eval_length=float("nan")) -> Row:
    return dict(env_steps=env_steps, wall_clock=wall_clock, eval_return=float(eval_return),
                eval_success=float(eval_success), eval_length=float(eval_length))


def _success_rate(env_id: str, make_policy, params, seed: int) -> float:
    """Success rate of a JAX policy's deterministic action over ``EVAL_EPISODES`` episodes
    of the Gymnasium env on the MuJoCo C backend (episode-end ``info["is_success"]``)."""
    import jax
    import jax.numpy as jnp

    from bcg_envs.envs.evaluation import run_episodes

    policy = jax.jit(make_policy(params, deterministic=True))
    key = jax.random.PRNGKey(seed)
    act = lambda obs: np.asarray(policy(jnp.asarray(obs), key)[0])  # noqa: E731
    return run_episodes(env_id, act, episodes=EVAL_EPISODES, seed=seed, backend="mujoco")["success_rate"]


def run_sb3_ppo(env_id: str, steps: int, seed: int, cfg: dict, evals: int) -> List[Row]:
    """stable-baselines3 PPO on ``n_envs`` Gymnasium envs on the MuJoCo C backend (the
    CPU fast path; same model and task code as the JAX env)."""
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.monitor import Monitor

    import bcg_envs  # noqa: F401

    params = dict(cfg["sb3_ppo"])
    n_envs = params.pop("n_envs", 1)
    env = make_vec_env(f"bcg_envs/{env_id}", n_envs=n_envs, seed=seed, env_kwargs={"backend": "mujoco"})
    eval_env = Monitor(gym.make(f"bcg_envs/{env_id}", backend="mujoco"))
    rows: List[Row] = []
    start = time.perf_counter()
    every = max(steps // evals, 1)

    def evaluate(num_timesteps: int) -> None:
        successes: List[bool] = []

        def on_step(locals_, _globals) -> None:  # the final step's info of each episode
            if locals_["done"]:
                successes.append(bool(locals_["info"].get("is_success", False)))

        returns, lengths = evaluate_policy(model, eval_env, n_eval_episodes=EVAL_EPISODES, deterministic=True,
                                           return_episode_rewards=True, callback=on_step)
        rows.append(_row(num_timesteps, time.perf_counter() - start, np.mean(returns), np.mean(successes),
                         np.mean(lengths)))

    class Eval(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps // every > (self.num_timesteps - n_envs) // every:
                evaluate(self.num_timesteps)
            return True

    params["n_steps"] = min(params["n_steps"], max(steps // (2 * n_envs), 16))
    params["batch_size"] = min(params["batch_size"], params["n_steps"] * n_envs)
    model = PPO("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **params)
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default makes an empty /tmp/SB3-* folder
    evaluate(0)
    model.learn(total_timesteps=steps, callback=Eval())
    if rows[-1]["env_steps"] != model.num_timesteps:
        evaluate(model.num_timesteps)
    env.close()
    eval_env.close()
    return rows


def _progress_rows(start: float, rows: List[Row]) -> Callable[[int, dict], None]:
    def progress(step: int, metrics: dict) -> None:
        if "eval/episode_reward" in metrics:
            length = metrics.get("eval/episode_length", metrics.get("eval/avg_episode_length", float("nan")))
            rows.append(_row(int(step), time.perf_counter() - start, metrics["eval/episode_reward"],
                             metrics.get("eval/success", float("nan")), length))

    return progress


def _final_success(rows: List[Row], env_id: str, make_policy, params, seed: int) -> None:
    """Fill the last row's success rate from the trained policy, where the learner's own
    evaluation did not report one."""
    if rows and np.isnan(rows[-1]["eval_success"]):
        rows[-1]["eval_success"] = _success_rate(env_id, make_policy, params, seed)


@functools.lru_cache(maxsize=None)
def _jax_env(env_id: str, estimator: str):
    """One JAX env per (id, estimator) in a process, shared by the seeds: a second instance
    of an env lowers to differently numbered MLIR (private function names), which misses
    the persistent compile cache, so every seed after the first would compile again."""
    import bcg_envs

    return bcg_envs.make_jax(env_id, estimator=estimator)


def run_brax_ppo(env_id: str, steps: int, seed: int, cfg: dict, evals: int) -> List[Row]:
    from brax.training.agents.ppo import train as ppo

    from bcg_envs.compat import enable_brax

    enable_brax()

    env = _jax_env(env_id, "exact")
    rows: List[Row] = []
    start = time.perf_counter()
    # Brax calls policy_params_fn after progress_fn at the first evaluation and before it at
    # the later ones: a rate waits in ``pending`` until its row exists.
    pending: Dict[int, float] = {}
    add_row = _progress_rows(start, rows)

    def progress(step: int, metrics: dict) -> None:
        add_row(step, metrics)
        if rows and int(rows[-1]["env_steps"]) in pending:
            rows[-1]["eval_success"] = pending.pop(int(rows[-1]["env_steps"]))

    def success(step: int, make_policy, params) -> None:
        rate = _success_rate(env_id, make_policy, params, seed)
        if rows and int(rows[-1]["env_steps"]) == int(step) and np.isnan(rows[-1]["eval_success"]):
            rows[-1]["eval_success"] = rate
        else:
            pending[int(step)] = rate

    ppo.train(environment=env, num_timesteps=steps, episode_length=env.episode_length, num_evals=evals + 1,
              seed=seed, progress_fn=progress, policy_params_fn=success, **cfg["brax_ppo"])
    return rows


def run_brax_apg(env_id: str, steps: int, seed: int, cfg: dict, evals: int) -> List[Row]:
    from brax.training.agents.apg import train as apg

    from bcg_envs.compat import enable_brax

    enable_brax()

    env = _jax_env(env_id, "exact")
    rows: List[Row] = []
    start = time.perf_counter()
    params = dict(cfg["brax_apg"])
    steps_per_update = params["horizon_length"] * params["num_envs"]
    updates = max(evals, steps // steps_per_update)
    # Brax APG reports the evaluation index, not env steps: convert.
    per_eval = round(updates / max(evals, 1)) * steps_per_update
    to_rows = _progress_rows(start, rows)
    make_policy, trained, _ = apg.train(
        environment=env, policy_updates=updates, episode_length=env.episode_length, num_evals=evals + 1,
        num_eval_envs=EVAL_EPISODES, seed=seed, progress_fn=lambda it, m: to_rows(it * per_eval, m), **params)
    _final_success(rows, env_id, make_policy, trained, seed)
    return rows


def _run_shac(estimator: str):
    def run(env_id: str, steps: int, seed: int, cfg: dict, evals: int) -> List[Row]:
        from bcg_envs.learners import shac

        env = _jax_env(env_id, estimator)
        rows: List[Row] = []
        start = time.perf_counter()
        params = dict(cfg["shac"])
        params["actor_hidden"] = tuple(params["actor_hidden"])
        params["critic_hidden"] = tuple(params["critic_hidden"])
        make_policy, trained, _ = shac.train(env, num_timesteps=steps, seed=seed, num_evals=evals + 1,
                                             num_eval_envs=EVAL_EPISODES, progress_fn=_progress_rows(start, rows),
                                             progress_bar=False, **params)
        _final_success(rows, env_id, make_policy, trained, seed)
        return rows

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
        writer = csv.DictWriter(f, fieldnames=["env_steps", "wall_clock", "eval_return", "eval_success", "eval_length"])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, float("nan")) for k in writer.fieldnames})


def read_runs(out_dir: Path) -> Dict[str, List[List[Row]]]:
    """algo -> list (over seeds) of rows, from ``<algo>_seed<s>.csv`` files."""
    runs: Dict[str, List[List[Row]]] = defaultdict(list)
    for path in sorted(out_dir.glob("*_seed*.csv")):
        algo = path.stem.rsplit("_seed", 1)[0]
        with path.open() as f:
            rows = [{"eval_success": float("nan"), "eval_length": float("nan"), **{k: float(v) for k, v in row.items()}}
                    for row in csv.DictReader(f)]  # CSVs written before success was recorded
        if rows:
            runs[algo].append(rows)
    return dict(runs)


def steps_to_reach(rows: List[Row], target: float) -> Optional[float]:
    for row in rows:
        if row["eval_return"] >= target:
            return row["env_steps"]
    return None


def summary_table(runs: Dict[str, List[List[Row]]], reference: str = "sb3_ppo") -> str:
    """Markdown: final return (mean +- std over seeds), final success rate with its 95 %
    Wilson interval (all seeds' ``EVAL_EPISODES`` episodes pooled; '—' if not recorded),
    final episode length, env steps to 90% of the reference's final return (median over
    seeds; '—' if never), wall-clock to the end."""
    ref = runs.get(reference) or runs.get("brax_ppo")
    target = None
    if ref:
        ref_final = float(np.mean([r[-1]["eval_return"] for r in ref]))
        # 90% of the way from the worst initial return to the reference's final return.
        initial = min(r[0]["eval_return"] for seeds in runs.values() for r in seeds)
        target = initial + 0.9 * (ref_final - initial)
    lines = [
        "| algorithm | seeds | final return | final success [95% CI] | episode length | env steps to 90% of PPO | wall-clock (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for algo, seeds in runs.items():
        finals = np.array([r[-1]["eval_return"] for r in seeds])
        wall = np.mean([r[-1]["wall_clock"] for r in seeds])
        if target is None:
            reach = "—"
        else:
            hits = [steps_to_reach(r, target) for r in seeds]
            hits = [h for h in hits if h is not None]
            reach = f"{np.median(hits):,.0f} ({len(hits)}/{len(seeds)})" if hits else f"— (0/{len(seeds)})"
        success = np.array([r[-1]["eval_success"] for r in seeds])
        success = success[~np.isnan(success)]
        if success.size:
            n = EVAL_EPISODES * success.size
            k = int(round(float(np.sum(success)) * EVAL_EPISODES))
            low, high = wilson_interval(k, n)
            success_text = format_success({"success_rate": k / n, "success_low": low, "success_high": high})
        else:
            success_text = "—"
        lengths = np.array([r[-1]["eval_length"] for r in seeds])
        length_text = f"{np.nanmean(lengths):.0f}" if np.any(~np.isnan(lengths)) else "—"
        lines.append(f"| {algo} | {len(seeds)} | {finals.mean():.2f} ± {finals.std():.2f} | {success_text} | {length_text} "
                     f"| {reach} | {wall:.0f} |")
    return "\n".join(lines)


def plot_curves(runs: Dict[str, List[List[Row]]], path: Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    for algo, seeds in runs.items():
        for ax, key in zip(axes, ("env_steps", "wall_clock")):
            grid = np.linspace(0, min(r[-1][key] for r in seeds), 50)
            curves = np.stack([np.interp(grid, [row[key] for row in r], [row["eval_return"] for row in r]) for r in seeds])
            mean, std = curves.mean(0), curves.std(0)
            ax.plot(grid, mean, label=algo)
            ax.fill_between(grid, mean - std, mean + std, alpha=0.2)
        # Success: the evaluations that recorded it (markers; a line where there are several).
        points = [(row["env_steps"], row["eval_success"]) for r in seeds for row in r if not np.isnan(row["eval_success"])]
        if points:
            steps_, rates = (np.array(v) for v in zip(*sorted(points)))
            uniq = np.unique(steps_)
            axes[2].plot(uniq, [rates[steps_ == u].mean() for u in uniq], marker="o", label=algo)
    axes[0].set(xlabel="environment steps", ylabel="evaluation return", title=title)
    axes[0].xaxis.set_major_formatter(matplotlib.ticker.EngFormatter())  # 50k, not 50000
    axes[1].set(xlabel="wall-clock (s)", ylabel="evaluation return")
    axes[2].set(xlabel="environment steps", ylabel="success rate", ylim=(-0.05, 1.05))
    axes[2].xaxis.set_major_formatter(matplotlib.ticker.EngFormatter())
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def compare(env_id: str, algos: List[str], seeds: List[int], steps: int, out_dir: Path, evals: int = 5,
            config: Optional[Path] = None) -> str:
    cfg = load_config(env_id, config)
    validate_config(cfg, env_id, algos)
    out_dir.mkdir(parents=True, exist_ok=True)
    for algo in algos:
        for seed in seeds:
            print(f"[{env_id}] {algo} seed {seed}: {steps:,} env steps")
            rows = RUNNERS[algo](env_id, steps, seed, cfg, evals)
            write_csv(out_dir / f"{algo}_seed{seed}.csv", rows)
    runs = read_runs(out_dir)
    table = summary_table(runs)
    (out_dir / "table.md").write_text(table + "\n")
    plot_curves(runs, out_dir / "curves.png", title=env_id)
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
    parser.add_argument("--config", default=None, help="JSON of hyper-parameters (default: baselines/configs/<env>.json)")
    args = parser.parse_args(argv)
    single_cpu_client()  # the 2-core batched-kernel deadlock (see bcg_envs.utils.single_cpu_client)
    out = Path(args.out or f"baselines/results/{args.env}")
    compare(args.env, args.algos, args.seeds, args.steps, out, args.evals, args.config)


if __name__ == "__main__":
    main()
