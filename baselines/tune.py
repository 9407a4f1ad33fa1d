"""Equal-effort hyper-parameter tuning for the comparison: the same grid size, env-step
budget and seed for every algorithm.

    python -m baselines.tune --env BoxPush-v0 --algos sb3_ppo shac_bcg --steps 200000 --seed 0

The grids are ``baselines/configs/tuning/grids.json`` (``--grids`` for another file): per
algorithm (``shac_exact``) or per config section (``sb3_ppo``, ``brax_ppo``, ``shac``,
``brax_apg``) either a list of values per key (the settings are their product) or an
explicit list of settings, the same number for every algorithm. A grid file may declare
its budgets (``"budgets": {env: {"steps": ..., "evals": ..., "config": ...}}``): those are
then the defaults, and a run asking for another budget is refused, so every setting of
every learner trains for the declared env steps. Every setting overrides the task's config
(``baselines/configs/<env>.json``, or ``--config``) and
trains once with the protocol of ``baselines.compare`` (same evaluation episodes,
deterministic policy). A setting is scored by its final success rate, ties broken by the
mean return of its last two evaluations. Runs go to ``<out>/<algo>/<setting>_seed<s>.csv``
and resume like the comparison's (finished settings are skipped); ``<out>/tuning.md`` lists
every setting's score and marks the best per algorithm. A setting is claimed by the
process training it (a lock file beside its checkpoints), so the same command started on
several cores splits a grid between them: each skips the settings another one holds.

The finals take the winners mechanically: ``--write-finals DIR`` trains nothing and writes
``DIR/<env>.<algo>.json`` per algorithm whose grid is complete (every setting at the
budget): the base config with the winning setting applied and a note naming it, its score
and the runner-up's (``finals_configs``).

    python -m baselines.tune --env BoxPush-v0 --grids baselines/configs/tuning/equal_effort.json \
        --algos sb3_ppo shac_exact --out baselines/results/BoxPush-v0/grid \
        --write-finals baselines/configs/finals
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

try:
    import fcntl
except ImportError:  # not POSIX: no claims, one process per grid
    fcntl = None

import numpy as np

from baselines import protocol, run_csv, runners
from bcg_envs.stats import format_success, wilson_interval

GRIDS = protocol.CONFIGS / "tuning" / "grids.json"


def settings(grid) -> List[Dict[str, object]]:
    """An explicit list of settings as it is, or every combination of a dict of value lists
    in the grid's key order."""
    if isinstance(grid, list):
        if not all(isinstance(s, dict) for s in grid):
            raise ValueError("an explicit grid is a list of JSON objects (one setting each)")
        return [dict(s) for s in grid]
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def setting_name(setting: Dict[str, object]) -> str:
    """A file-name-safe name of a setting: ``actor_lr=0.002,horizon=16``; a dict value
    (SB3's ``policy_kwargs``) names its entries: ``policy_kwargs.log_std_init=-1.0``."""
    parts = []
    for key, value in setting.items():
        if isinstance(value, dict):
            parts.extend(f"{key}.{k}={v}" for k, v in value.items())
        else:
            parts.append(f"{key}={value}")
    return ",".join(parts)


def score(rows: List[run_csv.Row]) -> Tuple[float, float]:
    """(final success rate, mean return of the last two evaluations): larger is better."""
    tail = rows[-2:]
    return rows[-1]["eval_success"], float(np.mean([r["eval_return"] for r in tail]))


def grid_of(grids: Dict[str, object], algo: str, grids_path: Path) -> object:
    """``algo``'s grid in a grid file: its own entry, else its config section's."""
    section = protocol.config_section(algo)
    grid = grids.get(algo, grids.get(section))
    if grid is None:
        raise ValueError(f"{grids_path} has no grid for {algo!r} (nor its config section {section!r})")
    return grid


@contextlib.contextmanager
def claimed(lock_path: Path) -> Iterator[bool]:
    """Hold an exclusive lock on ``lock_path`` for the block: yields True, or False at once
    when another process holds it. The operating system releases it when the holder exits,
    so a killed run leaves no stale claim."""
    if fcntl is None:
        yield True
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def tune(
    env_id: str,
    algos: List[str],
    steps: int,
    seed: int,
    out_dir: Path,
    evals: int = 5,
    grids_path: Path = GRIDS,
    config_path: Optional[Path] = None,
) -> str:
    """Run every setting of every algorithm's grid (skipping finished ones) and write
    ``tuning.md``; returns its text. The settings override ``config_path`` (default: the
    task's ``baselines/configs/<env>.json``)."""
    base = protocol.load_config(env_id, config_path)
    grids = json.loads(Path(grids_path).read_text())
    plans = []
    for algo in algos:
        section = protocol.config_section(algo)
        grid = grid_of(grids, algo, grids_path)
        for setting in settings(grid):
            cfg = json.loads(json.dumps(base))
            cfg[section].update(setting)
            runners.validate_config(cfg, env_id, [algo])
            protocol.check_budgets(cfg, [algo], steps, evals)
            plans.append((algo, setting, cfg))
    for algo, setting, cfg in plans:
        path = out_dir / algo / f"{setting_name(setting)}_seed{seed}.csv"
        if run_csv.is_complete(path, steps):
            continue
        name = f"{setting_name(setting)}_seed{seed}"
        checkpoints = out_dir / "checkpoints" / algo / name
        with claimed(checkpoints.parent / f"{name}.lock") as mine:
            if not mine:
                print(f"[{env_id}] tune {algo} {name}: another process is training it, skipped", flush=True)
                continue
            if run_csv.is_complete(path, steps):  # finished while this process waited for the claim
                continue
            print(f"[{env_id}] tune {algo} {setting_name(setting)} seed {seed}: {steps:,} env steps", flush=True)
            recorder = protocol.Recorder(env_id, path, protocol.env_kwargs_of(cfg))
            runners.RUNNERS[algo](env_id, steps, seed, cfg, evals, recorder, checkpoints)
    table = tuning_table(out_dir, plans, seed)
    (out_dir / "tuning.md").write_text(table + "\n")
    print(table)
    return table


def finals_configs(
    env_id: str,
    algos: List[str],
    steps: int,
    seed: int,
    out_dir: Path,
    dest: Path,
    grids_path: Path = GRIDS,
    config_path: Optional[Path] = None,
) -> Dict[str, Path]:
    """Write ``dest/<env>.<algo>.json`` for each of ``algos``: the config its grid's best
    setting trained with (``score``: final success, then return), with a ``note`` naming
    the setting, the grid and the scores. ValueError, writing nothing, when a setting of an
    algorithm's grid has not reached ``steps`` in ``out_dir`` (a winner is only chosen
    from a complete grid)."""
    base = protocol.load_config(env_id, config_path)
    grids = json.loads(Path(grids_path).read_text())
    chosen = {}
    for algo in algos:
        section = protocol.config_section(algo)
        grid = grid_of(grids, algo, grids_path)
        scored = []
        for setting in settings(grid):
            path = out_dir / algo / f"{setting_name(setting)}_seed{seed}.csv"
            if not run_csv.is_complete(path, steps):
                raise ValueError(f"{algo}'s grid is not complete: {path} has not reached {steps:,} env steps")
            scored.append((score(run_csv.read_rows(path)), setting))
        ranked = sorted(range(len(scored)), key=lambda i: scored[i][0], reverse=True)
        best, runner_up = scored[ranked[0]], scored[ranked[1]] if len(ranked) > 1 else None
        cfg = json.loads(json.dumps(base))
        cfg[section].update(best[1])
        runners.validate_config(cfg, env_id, [algo])

        def text(entry) -> str:
            (success, ret), setting = entry
            return f"{setting_name(setting)} (final success {100 * success:.1f} %, return {ret:.1f})"

        cfg["note"] = (
            f"{algo}'s finals config on {env_id}, written by baselines.tune --write-finals from its "
            f"equal-effort grid ({Path(grids_path).name}, {len(scored)} settings, {steps:,} env steps, seed {seed}, "
            f"results in {out_dir}): the best setting by final success, then return, "
            f"{text(best)}" + (f"; runner-up {text(runner_up)}" if runner_up else "") + "."
        )
        chosen[algo] = cfg
    dest.mkdir(parents=True, exist_ok=True)
    written = {}
    for algo, cfg in chosen.items():
        written[algo] = dest / f"{env_id}.{algo}.json"
        written[algo].write_text(json.dumps(cfg, indent=2) + "\n")
    return written


def tuning_table(out_dir: Path, plans, seed: int) -> str:
    lines = [
        "| algorithm | setting | final success [95% CI] | return (last 2 evals) | env steps | best |",
        "|---|---|---|---|---|---|",
    ]
    by_algo: Dict[str, list] = {}
    for algo, setting, _ in plans:
        rows = run_csv.read_rows(out_dir / algo / f"{setting_name(setting)}_seed{seed}.csv")
        if rows:
            by_algo.setdefault(algo, []).append((setting, rows))
    for algo, entries in by_algo.items():
        best = max(range(len(entries)), key=lambda i: score(entries[i][1]))
        for i, (setting, rows) in enumerate(entries):
            success, ret = score(rows)
            n = int(rows[-1]["eval_episodes"])
            k = int(round(success * n))
            low, high = wilson_interval(k, n)
            success_text = format_success({"success_rate": k / n, "success_low": low, "success_high": high})
            lines.append(
                f"| {algo} | {setting_name(setting)} | {success_text} | {ret:.1f} "
                f"| {rows[-1]['env_steps']:,.0f} | {'yes' if i == best else ''} |"
            )
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="BoxPush-v0", choices=protocol.ENV_IDS)
    parser.add_argument("--algos", nargs="+", default=list(protocol.ALGORITHMS), choices=list(protocol.ALGORITHMS))
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="env steps per setting (default: the grid file's declared budget, else 200,000)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--evals", type=int, default=None, help="evaluations per run (default: declared, else 5)")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--grids", default=str(GRIDS), help="JSON of the grids (default: baselines/configs/tuning/grids.json)"
    )
    parser.add_argument(
        "--config", default=None, help="JSON the settings override (default: baselines/configs/<env>.json)"
    )
    parser.add_argument(
        "--write-finals",
        default=None,
        metavar="DIR",
        help="train nothing: write DIR/<env>.<algo>.json, each algorithm's config with its grid's winner",
    )
    args = parser.parse_args(argv)
    declared = declared_budget(Path(args.grids), args.env)
    for key, default in (("steps", 200_000), ("evals", 5), ("config", None)):
        asked = getattr(args, key)
        if key in declared and asked is not None and asked != declared[key]:
            parser.error(
                f"--{key} {asked} differs from the budget {args.grids} declares for {args.env}: {declared[key]}"
            )
        setattr(args, key, asked if asked is not None else declared.get(key, default))
    out = Path(args.out or f"baselines/results/{args.env}/tuning")
    if args.write_finals:
        config = Path(args.config) if args.config else None
        try:
            written = finals_configs(
                args.env, args.algos, args.steps, args.seed, out, Path(args.write_finals), Path(args.grids), config
            )
        except ValueError as err:  # an incomplete grid: say which, without a traceback
            parser.error(f"--write-finals: {err}")
        for algo, path in written.items():
            print(f"{algo}: {path}")
        return
    tune(
        args.env,
        args.algos,
        args.steps,
        args.seed,
        out,
        args.evals,
        Path(args.grids),
        Path(args.config) if args.config else None,
    )


def declared_budget(grids_path: Path, env_id: str) -> Dict[str, object]:
    """The budget a grid file declares for ``env_id`` (``steps``, ``evals``, ``config``), or {}."""
    return dict(json.loads(Path(grids_path).read_text()).get("budgets", {}).get(env_id, {}))


if __name__ == "__main__":
    main()
