"""The final policies of a G1 comparison, run in both simulators: success, falls, tracking error.

    python -m baselines.final_scores --env G1Jump-v0 --steps 262144 --out baselines/results/G1Jump-v0/tuned

For every run of ``baselines.compare`` in ``--out`` that reached the budget ``--steps`` and
saved checkpoints (SB3 PPO and SHAC do, under ``<out>/checkpoints/<algo>_seed<s>/``), the
final policy is loaded as a NumPy policy (``bcg_envs.export``) and run by ``bcg_envs.sim2sim.sim_to_sim`` on the
comparison's evaluation episodes (reset seeds ``protocol.EVAL_SEED`` onward,
``protocol.EVAL_EPISODES`` of them) in MuJoCo C and in MJX. That is the sim-to-sim check for
SHAC (trained in MJX) and the reverse one for SB3 PPO (trained in MuJoCo C). Transfer
episodes do not end on the tracking-error termination (the policy keeps acting, as on a
robot), only on a fall, so success here can differ from the comparison's. The env takes the
``env_kwargs`` of the runs' config (``--config``, as ``baselines.compare`` was given it).
Under a kappa contact model (MJX only) the MJX columns are that model and the MuJoCo C
columns MuJoCo's own contact (``protocol.mujoco_contact_kwargs``): the transfer the BCG
paper checks.

Writes ``final_scores.csv`` (one row per run, with the ``env_kwargs`` it was scored under;
a rerun scores only the runs it lacks, and refuses a file scored under other env kwargs or
episode counts) and ``final_scores.md`` (per algorithm and simulator: success as the seed
mean with a 95 % bootstrap interval over seeds and pooled over every seed's episodes with
its 95 % Wilson interval; falls per episode and the tracking error (cm) of the episodes
that did not fall and of every episode, as seed means with bootstrap intervals). A fallen
episode's tracking error covers only its steps before the fall, so the two differ where
episodes fall.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from baselines import protocol, run_csv, write_csv
from baselines.seed_stats import seed_interval
from bcg_envs.stats import format_success, success_summary

#: CSV columns: the run, then each simulator's metrics (``_mjx``: MJX).
METRICS = (
    "success_rate",
    "falls",
    "completed",
    "tracking_error_cm",
    "joint_error_rad",
    "tracking_error_cm_no_fall",
    "joint_error_rad_no_fall",
)
KEY = ("algo", "seed", "env_steps", "episodes", "env_kwargs")
COLUMNS = KEY + tuple(f"{m}{s}" for s in ("", "_mjx") for m in METRICS)
RUN_CSV = re.compile(r"^(?P<algo>[a-z0-9_]+)_seed(?P<seed>\d+)\.csv$")


def sb3_policy(checkpoint_dir: Path) -> Callable[[np.ndarray], np.ndarray]:
    """SB3 PPO's deterministic policy from ``model.zip`` and ``vecnormalize.pkl`` (if saved)."""
    from baselines.export_sb3 import saved_policy_arrays
    from bcg_envs.export import NumpyPolicy

    stats = checkpoint_dir / "vecnormalize.pkl"
    return NumpyPolicy(saved_policy_arrays(checkpoint_dir / "model.zip", stats if stats.exists() else None))


def shac_policy(checkpoint_dir: Path) -> Callable[[np.ndarray], np.ndarray]:
    """SHAC's deterministic policy from the newest checkpoint in ``checkpoint_dir``."""
    from baselines.export_shac import checkpoint_policy_arrays
    from bcg_envs.export import NumpyPolicy

    return NumpyPolicy(checkpoint_policy_arrays(checkpoint_dir))


def checkpoint_steps(algo: str, checkpoint_dir: Path) -> int:
    """Env steps the checkpoint in ``checkpoint_dir`` was trained for."""
    if algo.startswith("shac"):
        from bcg_envs.learners import shac

        return int(shac.checkpoint_metadata(checkpoint_dir)["num_steps"])
    from stable_baselines3 import PPO

    return int(PPO.load(str(checkpoint_dir / "model.zip"), device="cpu").num_timesteps)


POLICIES: Dict[str, Callable[[Path], Callable[[np.ndarray], np.ndarray]]] = {
    "sb3_ppo": sb3_policy,
    "shac_exact": shac_policy,
    "shac_bcg": shac_policy,
}


def final_runs(out_dir: Path, steps: int) -> List[tuple]:
    """(algo, seed, checkpoint dir, final env steps) of every run in ``out_dir`` that
    reached the budget ``steps`` and checkpointed its policy; ValueError if a checkpoint is
    older than its CSV's last evaluation (the run was not resumed to the end)."""
    runs = []
    for path in sorted(out_dir.glob("*_seed*.csv")):
        match = RUN_CSV.match(path.name)
        if not match or match["algo"] not in POLICIES:
            continue
        ckpt = out_dir / "checkpoints" / f"{match['algo']}_seed{match['seed']}"
        if not run_csv.is_complete(path, steps) or not ckpt.is_dir():
            continue
        last = int(run_csv.read_rows(path)[-1]["env_steps"])
        trained = checkpoint_steps(match["algo"], ckpt)
        if trained < last:
            raise ValueError(f"{ckpt} holds a policy of {trained} env steps, but {path.name} reaches {last}")
        runs.append((match["algo"], int(match["seed"]), ckpt, last))
    return runs


def read_scores(path: Path) -> List[dict]:
    """The rows of a ``final_scores.csv`` (empty if absent)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def kwargs_key(env_kwargs: Optional[Dict[str, object]]) -> str:
    """The ``env_kwargs`` column: the scored env's keyword arguments as sorted JSON."""
    return json.dumps(env_kwargs or {}, sort_keys=True)


def _run(row: dict) -> tuple:
    return row["algo"], int(row["seed"]), int(row["env_steps"])


def _measured(row: dict) -> bool:
    """Whether ``row`` holds every metric of ``METRICS`` (rows from before a metric existed
    lack it)."""
    return all(row.get(f"{m}{s}") not in (None, "") for s in ("", "_mjx") for m in METRICS)


def score_runs(
    env_id: str,
    out_dir: Path,
    steps: int,
    episodes: int = protocol.EVAL_EPISODES,
    seed: int = protocol.EVAL_SEED,
    done: Sequence[dict] = (),
    env_kwargs: Optional[Dict[str, object]] = None,
) -> List[dict]:
    """One row of ``COLUMNS`` per final policy of a complete run in ``out_dir``
    (``sim_to_sim`` on both simulators, the env made with the runs' ``env_kwargs``),
    skipping runs ``done`` already scored with every metric, the same env steps, episodes
    and env kwargs."""
    import gymnasium as gym

    from bcg_envs.registry import NAMESPACE, short_name
    from bcg_envs.sim2sim import sim_to_sim

    key = kwargs_key(env_kwargs)
    scored = {_run(r) for r in done if _measured(r) and int(r["episodes"]) == episodes and r.get("env_kwargs") == key}
    todo = [run for run in final_runs(out_dir, steps) if (run[0], run[1], run[3]) not in scored]
    if not todo:
        return []
    env_kwargs = env_kwargs or {}
    mjx_env = gym.make(f"{NAMESPACE}/{short_name(env_id)}", **env_kwargs)  # one compile for every run
    mujoco_env = None
    if protocol.protocol_backend(env_kwargs) == "mjx":
        from bcg_envs.registry import make_jax

        mujoco_env = make_jax(env_id, **protocol.mujoco_contact_kwargs(env_kwargs))
    rows = []
    try:
        for algo, run_seed, ckpt, run_steps in todo:
            result = sim_to_sim(mjx_env, POLICIES[algo](ckpt), episodes=episodes, seed=seed, mujoco_env=mujoco_env)
            row = dict(algo=algo, seed=run_seed, env_steps=run_steps, episodes=episodes, env_kwargs=key)
            row.update({f"{m}{s}": result[f"{m}{s}"] for s in ("", "_mjx") for m in METRICS})
            print(f"{algo} seed {run_seed}: " + ", ".join(f"{k} {row[k]:.3g}" for k in COLUMNS[len(KEY) :]), flush=True)
            rows.append(row)
    finally:
        mjx_env.close()
    return rows


def seed_mean(values: Sequence[float], digits: int, scale: float = 1.0, unit: str = "") -> str:
    """``"mean [low, high]"`` over the seeds with a value (``seed_interval``), ``"—"`` for none."""
    finite = [scale * v for v in values if math.isfinite(v)]
    if not finite:
        return "—"
    mean, low, high = seed_interval(finite)
    text = f"{mean:.{digits}f}{unit}" + ("" if math.isnan(low) else f" [{low:.{digits}f}, {high:.{digits}f}]")
    return text + (f" ({len(finite)} of {len(values)} seeds)" if len(finite) < len(values) else "")


def table(rows: List[dict]) -> str:
    """Per algorithm, both simulators: success as the seed mean [95 % bootstrap over seeds]
    and pooled over every seed's episodes [95 % Wilson]; falls per episode and the tracking
    error of the episodes without a fall and of every episode (a fallen one up to its fall),
    as seed means [95 % bootstrap] ("—" where not measured)."""
    runs_seen = [(r["algo"], int(r["seed"])) for r in rows]
    if len(set(runs_seen)) < len(runs_seen):
        raise ValueError(
            "final scores hold one run twice (another budget or episode count): score one setting per file"
        )
    lines = [
        "| algorithm | seeds | simulator | success, seed mean [95 % bootstrap] | success, pooled episodes "
        "[95 % Wilson] | falls per episode | tracking error, episodes without a fall (cm) | tracking error, "
        "every episode up to its end or fall (cm) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for algo in sorted({r["algo"] for r in rows}):
        runs = [r for r in rows if r["algo"] == algo]
        for name, sfx in (("MuJoCo C", ""), ("MJX", "_mjx")):
            rates = [float(r[f"success_rate{sfx}"]) for r in runs]
            wins = int(round(sum(rate * int(r["episodes"]) for rate, r in zip(rates, runs))))
            n = sum(int(r["episodes"]) for r in runs)
            pooled = format_success(success_summary([True] * wins + [False] * (n - wins)))

            def values(key: str) -> List[float]:
                return [float(r.get(f"{key}{sfx}") or "nan") for r in runs]

            falls = [float(r[f"falls{sfx}"]) / int(r["episodes"]) for r in runs]
            lines.append(
                f"| {algo} | {len(runs)} | {name} | {seed_mean(rates, 1, 100.0, ' %')} | {pooled} | "
                f"{seed_mean(falls, 2)} | {seed_mean(values('tracking_error_cm_no_fall'), 1)} | "
                f"{seed_mean(values('tracking_error_cm'), 1)} |"
            )
    return "\n".join(lines) + "\n"


def tool_arguments(
    description: str, argv: Optional[List[str]], episodes: Optional[int] = None
) -> Tuple[argparse.Namespace, Dict[str, object], Path]:
    """The command line shared by the tools that run a G1 comparison's final policies:
    ``--env``, ``--config`` (the runs' config, for its ``env_kwargs``), ``--steps`` (the
    runs' budget), ``--out`` (the comparison folder) and, where ``episodes`` is given,
    ``--episodes`` with that default. Returns the arguments, the env kwargs and the folder."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="G1Jump-v0", choices=protocol.ENV_IDS)
    parser.add_argument(
        "--config", required=True, help="the runs' config, as baselines.compare was given it (for its env_kwargs)"
    )
    parser.add_argument(
        "--steps", type=int, required=True, help="the runs' env-step budget (incomplete runs are skipped)"
    )
    parser.add_argument("--out", required=True, help="a folder of baselines.compare runs with checkpoints")
    if episodes is not None:
        parser.add_argument("--episodes", type=int, default=episodes, help="episodes per policy and simulator")
    args = parser.parse_args(argv)
    return args, protocol.env_kwargs_of(protocol.load_config(args.env, args.config)), Path(args.out)


def write_tool_outputs(
    out_dir: Path, name: str, columns: Sequence[str], rows: List[dict], table_fn: Callable[[List[dict]], str]
) -> str:
    """``<name>.csv`` (``rows``) and ``<name>.md`` (``table_fn(rows)``) in ``out_dir``; the
    table is printed and returned. SystemExit where there are no rows."""
    if not rows:
        raise SystemExit(f"no complete run with a checkpointed final policy in {out_dir}")
    write_csv(out_dir / f"{name}.csv", columns, rows)
    text = table_fn(rows)
    (out_dir / f"{name}.md").write_text(text)
    print(text)
    return text


def main(argv: Optional[List[str]] = None) -> str:
    args, env_kwargs, out_dir = tool_arguments(__doc__, argv, episodes=protocol.EVAL_EPISODES)
    path = out_dir / "final_scores.csv"
    done = read_scores(path)
    for r in done:
        if r.get("env_kwargs") != kwargs_key(env_kwargs) or int(r["episodes"]) != args.episodes:
            raise SystemExit(
                f"{path} holds {r['algo']} seed {r['seed']} scored with env_kwargs {r.get('env_kwargs')} and "
                f"{r['episodes']} episodes; this command asks for {kwargs_key(env_kwargs)} and {args.episodes}: "
                "pass the runs' --config and --episodes, or move the file to score anew"
            )
    new = score_runs(args.env, out_dir, args.steps, episodes=args.episodes, done=done, env_kwargs=env_kwargs)
    rescored = {_run(r) for r in new}
    rows = [r for r in done if _run(r) not in rescored] + new
    return write_tool_outputs(out_dir, "final_scores", COLUMNS, rows, table)


if __name__ == "__main__":
    main()
