"""Contact-event forces per task: the measurements behind each task's ``bcg`` threshold.

``python -m baselines.contact_events [--env BoxPush-v0 ...] [--episodes 20]
[--contact-model penalty --kappa 300] [--policy assets/policies/G1Jump-v0.shac_exact.npz]``

Runs each task's scripted controller (and, for BoxPush and PlanarHand, uniform random
actions; for PlanarHand also ``gentle`` ones, a quarter of the range), or an exported
policy (``--policy``, deterministic), and records, per control step, the largest
contact-event force (``info["max_contact_force"]``: the normal forces between one pair of
bodies summed, the largest over the step's substeps), its rise within the step
(``info["max_contact_rise"]``) and the largest single contact's force
(``info["max_point_force"]``: what the BCG paper's trigger compares; a G1 foot's event sums
four spheres).

Contact models (``--contact-model``): ``mujoco``, MuJoCo's soft constraints, on the
MuJoCo C backend; ``penalty`` (the BCG paper's penalty model) and ``moreau`` (its authors'
Moreau time-stepping) at sharpness ``--kappa`` (1/m; 300 without it), on the MJX backend,
the only one that has them.
The env checks both arguments. Steps with contact are grouped by what happens physically:

* ``onset``: contact begins (no event force above ``CONTACT_N`` at the previous step): a
  strike, a fingertip impact, a landing after flight (a G1 foot touching down while the
  other stands counts as sustained: the groups are per robot, not per event);
* ``sustained``: contact at this and the previous step: pushing, a steady grasp, stance.

For each group it prints quantiles of the force, the rise and the single-contact force and
the fraction of steps at which each trigger (``BundleConfig.trigger``) fires at the task's
default threshold (columns ``bundled_*``; ``bundled_point``: ``trigger="point"``, the
paper's; ``bcg`` bundles each such step and the ``horizon - 1`` after it), and appends the rows to
``baselines/results/contact_events.csv``.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

from baselines import append_csv
from bcg_envs.physics.penalty_contact import PenaltyContact
from bcg_envs.physics.simulator import CONTACT_MODELS, KAPPA_MODELS

RESULTS = Path(__file__).resolve().parent / "results" / "contact_events.csv"
#: An event force above this (N) counts as contact.
CONTACT_N = 0.05
TASKS = ("BoxPush-v0", "PlanarHand-v0", "G1Squat-v0", "G1Jump-v0", "G1Kick-v0")
#: The measured (numeric) columns of a row: event-force, rise and single-contact-force
#: quantiles (N), the threshold (N) and the fractions at which each trigger fires (``point``: a
#: single contact's force above the threshold, ``trigger="point"``). Rows written before the
#: single-contact columns existed leave them blank.
MEASURED = (
    "force_p50",
    "force_p90",
    "force_p99",
    "rise_p50",
    "rise_p90",
    "rise_p99",
    "point_p50",
    "point_p90",
    "point_p99",
    "threshold",
    "bundled_force",
    "bundled_onset",
    "bundled_point",
)
FIELDS = ("env", "contact_model", "kappa", "policy", "group", "steps", *MEASURED)


def policies(env_id: str, env) -> Dict[str, Callable[[int], Callable[[np.ndarray], np.ndarray]]]:
    """The task's measuring policies: name -> factory of a fresh policy (observation ->
    action) for episode ``seed``. G1: the reference replay; BoxPush and PlanarHand: the
    scripted controller and uniform random actions (PlanarHand also ``gentle``, a quarter
    of the range)."""
    if env_id.startswith("G1"):
        from bcg_envs.envs.g1.scripted import reference_policy

        return {"replay": lambda seed: reference_policy(env)}
    if env_id == "BoxPush-v0":
        from bcg_envs.envs.box_push.scripted import scripted_push as scripted
    else:
        from bcg_envs.envs.planar_hand.scripted import scripted_rotate as scripted
    n = env.action_space.shape[0]

    def random(seed: int, amplitude: float = 1.0):
        rng = np.random.default_rng(seed)  # each episode its own action sequence
        return lambda obs: (amplitude * rng.uniform(-1.0, 1.0, n)).astype(np.float32)

    policies = {"scripted": lambda seed: scripted, "random": random}
    if env_id == "PlanarHand-v0":  # gentle manipulation: servo targets stay near the fingers
        policies["gentle"] = lambda seed: random(seed, 0.25)
    return policies


def contact_group(force: float, force_before: float) -> str:
    """``"onset"`` / ``"sustained"`` for a step with contact (event force ``force`` above
    ``CONTACT_N``; ``force_before`` is the previous step's), ``"none"`` without."""
    if force <= CONTACT_N:
        return "none"
    return "onset" if force_before <= CONTACT_N else "sustained"


def exported_policy(env_id: str, path: Path) -> Dict[str, Callable[[int], Callable[[np.ndarray], np.ndarray]]]:
    """The deterministic exported policy at ``path`` (``bcg_envs.numpy_policy``) as the one
    measuring policy, named by its file; ValueError if it belongs to another task."""
    from bcg_envs.numpy_policy import NumpyPolicy

    policy = NumpyPolicy.load(path)
    if policy.env_id and policy.env_id != env_id:
        raise ValueError(f"--policy {path} is a policy of {policy.env_id}, not of {env_id}")
    return {Path(path).name: lambda seed: policy}


def measure(
    env_id: str,
    episodes: int,
    seed: int = 0,
    contact_model: str = "mujoco",
    kappa: Optional[float] = None,
    policy: Optional[Path] = None,
) -> List[Dict[str, object]]:
    """Per policy and group, the force/rise quantiles and the bundled fractions, under
    ``contact_model`` (``"penalty"`` and ``"moreau"`` run on MJX at sharpness ``kappa``,
    1/m, default 300; the env rejects a bad model or kappa with ValueError). ``policy``: an
    exported policy file measured in place of the task's own policies (``policies``), on
    the task's default configuration."""
    import gymnasium as gym

    import bcg_envs  # noqa: F401  (registers the ids)

    if contact_model in KAPPA_MODELS and kappa is None:
        kappa = PenaltyContact.kappa
    kwargs: Dict[str, object] = {
        "backend": "mjx" if contact_model in KAPPA_MODELS else "mujoco",
        "contact_model": contact_model,
    }
    if kappa is not None:
        kwargs["kappa"] = float(kappa)
    if env_id.startswith("G1") and policy is None:
        kwargs["config"] = {"residual_actions": False}  # the replay's actions are absolute targets
    measuring = exported_policy(env_id, Path(policy)) if policy is not None else None
    env = gym.make(f"bcg_envs/{env_id}", **kwargs)
    threshold = float(env.unwrapped.jax_env.default_force_threshold)
    rows = []
    try:
        for name, factory in (measuring or policies(env_id, env)).items():
            groups: Dict[str, List[tuple]] = {"onset": [], "sustained": []}
            for ep in range(episodes):
                policy = factory(seed + ep)
                obs, _ = env.reset(seed=seed + ep)
                before = float("inf")  # a reset in contact (standing) is not an onset
                while True:
                    obs, _, terminated, truncated, info = env.step(policy(obs))
                    force, rise = float(info["max_contact_force"]), float(info["max_contact_rise"])
                    group = contact_group(force, before)
                    if group != "none":
                        groups[group].append((force, rise, float(info["max_point_force"])))
                    before = force
                    if terminated or truncated:
                        break
            for group, values in groups.items():
                v = np.asarray(values, float).reshape(-1, 3)
                q = lambda x, p: float(np.percentile(x, p)) if len(x) else float("nan")  # noqa: E731
                rows.append(
                    {
                        "env": env_id,
                        "contact_model": contact_model,
                        "kappa": "" if kappa is None else float(kappa),
                        "policy": name,
                        "group": group,
                        "steps": len(v),
                        "force_p50": q(v[:, 0], 50),
                        "force_p90": q(v[:, 0], 90),
                        "force_p99": q(v[:, 0], 99),
                        "rise_p50": q(v[:, 1], 50),
                        "rise_p90": q(v[:, 1], 90),
                        "rise_p99": q(v[:, 1], 99),
                        "point_p50": q(v[:, 2], 50),
                        "point_p90": q(v[:, 2], 90),
                        "point_p99": q(v[:, 2], 99),
                        "threshold": threshold,
                        "bundled_force": float(np.mean(v[:, 0] > threshold)) if len(v) else float("nan"),
                        "bundled_onset": float(np.mean(v[:, 1] > threshold)) if len(v) else float("nan"),
                        "bundled_point": float(np.mean(v[:, 2] > threshold)) if len(v) else float("nan"),
                    }
                )
    finally:
        env.close()
    return rows


def contact_label(row: Dict[str, object]) -> str:
    """``mujoco``, ``penalty (kappa K)`` or ``moreau (kappa K)`` for a row of ``measure``."""
    model = row["contact_model"]
    return "mujoco" if model == "mujoco" else f"{model} (kappa {float(row['kappa']):g})"


def table(rows: List[Dict[str, object]]) -> str:
    """Markdown table of ``measure``'s rows. The single-contact columns appear when some row
    has them (rows with steps measured before they existed read "not measured")."""
    measured = lambda r: not int(r["steps"]) or not math.isnan(float(r.get("point_p50", math.nan)))  # noqa: E731
    points = any(measured(r) for r in rows)
    head = "| env | contact | policy | group | steps | force p50 / p90 / p99 (N) | rise p50 / p90 / p99 (N) | "
    head += "single contact p50 / p90 / p99 (N) | " if points else ""
    head += "threshold (N) | fires: force | fires: onset |"
    head += " fires: single contact |" if points else ""
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for r in rows:
        line = (
            f"| {r['env']} | {contact_label(r)} | {r['policy']} | {r['group']} | {r['steps']} | "
            f"{r['force_p50']:.1f} / {r['force_p90']:.1f} / {r['force_p99']:.1f} | "
            f"{r['rise_p50']:.1f} / {r['rise_p90']:.1f} / {r['rise_p99']:.1f} | "
        )
        if points:
            line += (
                f"{r['point_p50']:.1f} / {r['point_p90']:.1f} / {r['point_p99']:.1f} | "
                if measured(r)
                else "not measured | "
            )
        line += f"{r['threshold']:g} | {100 * r['bundled_force']:.0f} % | {100 * r['bundled_onset']:.0f} % |"
        if points:
            line += f" {100 * r['bundled_point']:.0f} % |" if measured(r) else " not measured |"
        lines.append(line)
    return "\n".join(lines)


def main(argv=None) -> List[Dict[str, object]]:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--env", nargs="+", default=list(TASKS), choices=TASKS, help="tasks to measure")
    parser.add_argument("--episodes", type=int, default=20, help="episodes per policy (seeds seed, seed + 1, ...)")
    parser.add_argument("--seed", type=int, default=0, help="first episode seed")
    parser.add_argument(
        "--contact-model",
        default="mujoco",
        choices=CONTACT_MODELS,
        help="mujoco: MuJoCo C; penalty, moreau: the BCG paper's model and its authors' on MJX",
    )
    parser.add_argument(
        "--kappa",
        type=float,
        default=None,
        help=f"contact sharpness (1/m; penalty and moreau only, default {PenaltyContact.kappa:g})",
    )
    parser.add_argument(
        "--policy",
        default=None,
        help="an exported policy (.npz) measured in place of the task's scripted, random and replay policies",
    )
    parser.add_argument("--out", default=str(RESULTS), help="CSV the rows are appended to (empty: none)")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    rows = []
    for env_id in args.env:
        start = time.perf_counter()
        new = measure(env_id, args.episodes, args.seed, args.contact_model, args.kappa, args.policy)
        print(table(new) + f"\n({env_id}: {time.perf_counter() - start:.0f} s)\n", flush=True)
        rows += new
    if args.out:
        append_csv(Path(args.out), FIELDS, rows)
    return rows


if __name__ == "__main__":
    main()
