"""How often the final policies of a G1 comparison hold an actuator at its torque limit.

    python -m baselines.actuator_saturation --env G1Jump-v0 \\
        --config baselines/configs/G1Jump-v0.moreau_k300.json --steps 262144 \\
        --out baselines/results/G1Jump-v0/moreau_k300

A saturated actuator is where policies trained with MJX's own ``implicitfast`` step (which
keeps a clamped actuator's velocity gain; the MJX backend now drops it, as MuJoCo C does:
docs/environments.md, "Two physics backends") met a different physics in MuJoCo C, and
where a policy's gradients see no torque response. For every run in ``--out`` that reached
``--steps`` with a checkpoint (``final_scores.final_runs``), the deterministic final policy
runs ``--episodes`` episodes (reset seeds ``protocol.EVAL_SEED`` onward) in MJX under the
runs' env kwargs and in MuJoCo C under MuJoCo's own contact. At the end of each control
step an actuator counts as saturated when its force is at a ``forcerange`` bound (within
1e-6 N m: the clamp returns the bound itself). Writes ``actuator_saturation.csv`` (one row
per run and simulator) and ``actuator_saturation.md`` (per algorithm and simulator: the
share of control steps with a saturated actuator, per seed and as the seed mean).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

from baselines import protocol
from baselines.final_scores import POLICIES, final_runs, tool_arguments, write_tool_outputs

#: N m: how close to a ``forcerange`` bound a clamped force is (the clamp returns the bound).
AT_BOUND = 1e-6
COLUMNS = ("algo", "seed", "env_steps", "simulator", "episodes", "steps", "saturated_steps", "saturated_actuator_steps")


def saturated(force: np.ndarray, forcerange: np.ndarray, limited: np.ndarray) -> np.ndarray:
    """Per actuator: force-limited and its force at a bound of ``forcerange`` (nu, 2)."""
    force = np.asarray(force, np.float64)
    at_bound = (np.abs(force - forcerange[:, 0]) < AT_BOUND) | (np.abs(force - forcerange[:, 1]) < AT_BOUND)
    return np.asarray(limited, bool) & at_bound


def count(env, policy: Callable[[np.ndarray], np.ndarray], episodes: int, seed: int) -> Dict[str, int]:
    """Control steps, steps with a saturated actuator and saturated actuator-steps over
    ``episodes`` episodes of ``policy`` on the Gymnasium ``env`` (either backend)."""
    model = env.unwrapped.model
    steps = any_saturated = actuator_steps = 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(policy(obs))
            done = terminated or truncated
            sat = saturated(env.unwrapped.data.actuator_force, model.actuator_forcerange, model.actuator_forcelimited)
            steps += 1
            any_saturated += int(sat.any())
            actuator_steps += int(sat.sum())
    return {"steps": steps, "saturated_steps": any_saturated, "saturated_actuator_steps": actuator_steps}


def measure(env_id: str, out_dir: Path, steps: int, episodes: int, env_kwargs: Dict[str, object]) -> List[dict]:
    """One row per complete run in ``out_dir`` and simulator (``"mjx"``, ``"mujoco"``)."""
    import gymnasium as gym

    from bcg_envs.registry import NAMESPACE, short_name

    name = f"{NAMESPACE}/{short_name(env_id)}"
    envs = {
        "mjx": gym.make(name, **env_kwargs),
        "mujoco": gym.make(name, backend="mujoco", **protocol.mujoco_contact_kwargs(env_kwargs)),
    }
    rows = []
    try:
        for algo, seed, ckpt, run_steps in final_runs(out_dir, steps):
            policy = POLICIES[algo](ckpt)
            for simulator, env in envs.items():
                counts = count(env, policy, episodes, protocol.EVAL_SEED)
                rows.append(
                    dict(algo=algo, seed=seed, env_steps=run_steps, simulator=simulator, episodes=episodes, **counts)
                )
                share = counts["saturated_steps"] / counts["steps"]
                print(
                    f"{algo} seed {seed} {simulator}: {100 * share:.1f} % of steps with a saturated actuator",
                    flush=True,
                )
    finally:
        for env in envs.values():
            env.close()
    return rows


def table(rows: List[dict]) -> str:
    """Per algorithm and simulator: the share of control steps with a saturated actuator."""
    names = {"mjx": "MJX", "mujoco": "MuJoCo C"}
    lines = [
        "| algorithm | simulator | seeds | steps with a saturated actuator, per seed (%) | seed mean (%) |",
        "|---|---|---|---|---|",
    ]
    for algo in sorted({r["algo"] for r in rows}):
        for simulator in ("mjx", "mujoco"):
            picked = sorted(
                (r for r in rows if r["algo"] == algo and r["simulator"] == simulator), key=lambda r: int(r["seed"])
            )
            if not picked:
                continue
            shares = [100 * int(r["saturated_steps"]) / int(r["steps"]) for r in picked]
            per_seed = ", ".join(f"{s:.1f}" for s in shares)
            lines.append(f"| {algo} | {names[simulator]} | {len(picked)} | {per_seed} | {np.mean(shares):.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> str:
    args, env_kwargs, out = tool_arguments(__doc__, argv, episodes=16)
    rows = measure(args.env, out, args.steps, args.episodes, env_kwargs)
    return write_tool_outputs(out, "actuator_saturation", COLUMNS, rows, table)


if __name__ == "__main__":
    main()
