"""Whether a kappa-trained G1 policy's transfer gap is the contact model or the simulator.

    python -m baselines.contact_transfer --env G1Jump-v0 \\
        --config baselines/configs/G1Jump-v0.moreau_k300.json --steps 262144 \\
        --out baselines/results/G1Jump-v0/moreau_k300

``baselines.final_scores`` scores a policy trained under a kappa contact model (MJX only) in
MJX under that model and in MuJoCo C under MuJoCo's own contact: the two differ in contact
model and in simulator at once. This runs every final policy of ``--out``
(``final_scores.final_runs``) on the protocol's evaluation episodes in three physics: MJX
under the runs' contact model, MJX under MuJoCo's contact (``protocol.mujoco_contact_kwargs``)
and MuJoCo C under MuJoCo's contact, through ``bcg_envs.sim2sim.sim_to_sim`` (transfer
episodes end only on a fall). Where the two MuJoCo-contact columns agree, the gap to the
first column is the contact model's. Also reported: the mean over steps of the deepest
foot penetration into the floor (mm), where the authors' model lets feet sink (its impulse
is scaled by ``sigmoid(kappa * penetration)``).

Writes ``contact_transfer.csv`` (one row per run and physics; a rerun scores only the runs
it lacks) and ``contact_transfer.md`` (per algorithm and physics, seed means with 95 %
bootstrap intervals over seeds).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Dict, List, Optional

from baselines import protocol
from baselines.final_scores import POLICIES, final_runs, seed_mean, tool_arguments, write_tool_outputs

#: The three physics, in the table's order: (name, which env, which side of ``sim_to_sim``).
PHYSICS = (
    ("MJX, trained contact model", "trained", "_mjx"),
    ("MJX, MuJoCo contact", "mujoco", "_mjx"),
    ("MuJoCo C, MuJoCo contact", "mujoco", ""),
)
COLUMNS = ("algo", "seed", "env_steps", "physics", "episodes", "success_rate", "falls", "penetration_mm")


def score(env_id: str, out_dir: Path, steps: int, env_kwargs: Dict[str, object], done: List[dict]) -> List[dict]:
    """Rows of ``COLUMNS`` for every final policy in ``out_dir`` not already in ``done``."""
    import gymnasium as gym

    from bcg_envs.registry import NAMESPACE, make_jax, short_name
    from bcg_envs.sim2sim import sim_to_sim

    scored = {(r["algo"], int(r["seed"]), int(r["env_steps"])) for r in done}
    todo = [run for run in final_runs(out_dir, steps) if (run[0], run[1], run[3]) not in scored]
    if not todo:
        return []
    soft = protocol.mujoco_contact_kwargs(env_kwargs)
    envs = {
        "trained": gym.make(f"{NAMESPACE}/{short_name(env_id)}", **env_kwargs),
        "mujoco": gym.make(f"{NAMESPACE}/{short_name(env_id)}", **soft),
    }
    c_side = make_jax(env_id, **soft)
    rows = []
    try:
        for algo, seed, ckpt, run_steps in todo:
            policy = POLICIES[algo](ckpt)
            results = {
                name: sim_to_sim(
                    env, policy, episodes=protocol.EVAL_EPISODES, seed=protocol.EVAL_SEED, mujoco_env=c_side
                )
                for name, env in envs.items()
            }
            for physics, which, side in PHYSICS:
                result = results[which]
                rows.append(
                    dict(
                        algo=algo,
                        seed=seed,
                        env_steps=run_steps,
                        physics=physics,
                        episodes=protocol.EVAL_EPISODES,
                        success_rate=result[f"success_rate{side}"],
                        falls=result[f"falls{side}"],
                        penetration_mm=result[f"penetration_mm{side}"],
                    )
                )
                print(f"{algo} seed {seed}, {physics}: " + ", ".join(f"{k} {rows[-1][k]:.3g}" for k in COLUMNS[5:]))
    finally:
        for env in envs.values():
            env.close()
    return rows


def table(rows: List[dict]) -> str:
    """Per algorithm and physics: success (%), falls per episode and foot penetration (mm),
    seed means [95 % bootstrap over seeds]."""
    lines = [
        "| algorithm | seeds | physics | success, seed mean [95 % bootstrap] | falls per episode "
        "| deepest foot penetration (mm) |",
        "|---|---|---|---|---|---|",
    ]
    for algo in sorted({r["algo"] for r in rows}):
        for physics, _, _ in PHYSICS:
            runs = [r for r in rows if r["algo"] == algo and r["physics"] == physics]
            success = [float(r["success_rate"]) for r in runs]
            falls = [float(r["falls"]) / int(r["episodes"]) for r in runs]
            depth = [float(r["penetration_mm"]) for r in runs]
            lines.append(
                f"| {algo} | {len(runs)} | {physics} | {seed_mean(success, 1, 100.0, ' %')} | {seed_mean(falls, 2)} | "
                f"{seed_mean(depth, 1)} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> str:
    args, env_kwargs, out_dir = tool_arguments(__doc__, argv)
    if protocol.protocol_backend(env_kwargs) != "mjx":
        raise SystemExit(
            f"--config {args.config}: its runs use MuJoCo's contact; there is no contact model to separate"
        )
    path = out_dir / "contact_transfer.csv"
    done = list(csv.DictReader(path.open(newline=""))) if path.exists() else []
    rows = done + score(args.env, out_dir, args.steps, env_kwargs, done)
    return write_tool_outputs(out_dir, "contact_transfer", COLUMNS, rows, table)


if __name__ == "__main__":
    main()
