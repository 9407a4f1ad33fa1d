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
learn and are scored on the same physics. Under the kappa contact models
(``contact_model="penalty"`` or ``"moreau"``, MJX only) the evaluation and SB3 PPO run on
the MJX backend instead of MuJoCo C. ``env_kwargs.bundle`` (a JSON object of
``BundleConfig`` fields, e.g. ``{"trigger": "point"}``) sets the bcg learner's bundle.

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
same episodes; ``resumes``: how many times the run was resumed so far (a resumed run's
wall-clock is not a timing). Columns a CSV predates read as nan.
Long runs resume: a run whose CSV already reaches the budget
is skipped; SB3 PPO and SHAC save a checkpoint under ``<out>/checkpoints/`` at every
evaluation, after its row (SB3 PPO after that rollout's update), and continue from it
(rows after the checkpoint are dropped and measured again; the wall-clock continues from
the last kept row) under the same budget, seed, evaluations and config only
(``baselines.resume``); Brax runs restart. The summary covers the
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
from pathlib import Path
from typing import List, Optional

from baselines import protocol, run_csv, runners, summary


def compare(
    env_id: str,
    algos: List[str],
    seeds: List[int],
    steps: int,
    out_dir: Path,
    evals: int = 5,
    config: Optional[Path] = None,
) -> str:
    cfg = protocol.load_config(env_id, config)
    runners.validate_config(cfg, env_id, algos)
    planned = protocol.check_budgets(cfg, algos, steps, evals)
    out_dir.mkdir(parents=True, exist_ok=True)
    for algo in algos:
        for seed in seeds:
            path = out_dir / f"{algo}_seed{seed}.csv"
            if run_csv.is_complete(path, planned[algo]):
                print(f"[{env_id}] {algo} seed {seed}: complete in {path}, skipped")
                continue
            print(f"[{env_id}] {algo} seed {seed}: {planned[algo]:,} env steps", flush=True)
            checkpoints = out_dir / "checkpoints" / f"{algo}_seed{seed}"
            kwargs = protocol.env_kwargs_of(cfg)
            recorder = protocol.Recorder(
                env_id, path, kwargs, budget=planned[algo], train_backend=protocol.training_backend(algo, kwargs)
            )
            runners.RUNNERS[algo](env_id, steps, seed, cfg, evals, recorder, checkpoints)
    budgets = {
        a: protocol.planned_env_steps(a, cfg, steps, evals)
        for a in protocol.ALGORITHMS
        if protocol.config_section(a) in cfg
    }
    runs = run_csv.read_runs(out_dir, budgets)
    table = summary.summary_table(run_csv.at_budget(runs, budgets))
    (out_dir / "table.md").write_text(table + "\n")
    summary.plot_curves(runs, out_dir / "curves.png", title=env_id, budget=steps)
    print(table)
    return table


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="BoxPush-v0", choices=protocol.ENV_IDS)
    parser.add_argument("--algos", nargs="+", default=list(protocol.ALGORITHMS), choices=list(protocol.ALGORITHMS))
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
