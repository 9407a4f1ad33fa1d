"""Dry friction and the ``bcg`` trigger: step Jacobians where a joint's friction changes regime.

``python -m baselines.friction_switches [--env BoxPush-v0 PlanarHand-v0] [--episodes 10]``

BoxPush's and PlanarHand's objects slide on joints with dry friction (MuJoCo
``frictionloss``): a constraint whose force saturates at the friction limit while the
object slides and stays inside it while the object sticks. ``bcg`` triggers on contact
events only; this script measures whether the regime changes of dry friction need a trigger
of their own.

It runs each task's measuring policies (``baselines.contact_events.policies``: the scripted
controller, uniform random actions and, on PlanarHand, gentle ones) on the MuJoCo C backend
and, per control step, takes ``grad_step(estimator="exact")`` (MuJoCo C: finite differences)
and replays the step's substeps on a copy to see whether any frictionloss constraint changed
regime (saturated <-> inside its limit). Steps are grouped as ``onset`` / ``sustained``
contact (as in ``baselines.contact_events``), ``friction_switch`` (no contact, a regime
change) and ``smooth`` (neither). For the ``--top`` steps with the largest finite-difference
``||A||_F`` it evaluates the same state and action again: central differences of the control
step in MuJoCo C at step sizes ``FD_STEPS`` (``mj_step`` on copies of the data, warm start
included) and MJX's exact step Jacobian (the implicit-function derivative the learners
use). A step map that is differentiable at the finite-difference scale gives norms that
agree across step sizes.

Rows go to ``baselines/results/friction_switches.csv`` (group quantiles) and
``friction_switches_top.csv`` (the re-evaluated steps); both tables are printed.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Dict, List, Tuple

import mujoco
import numpy as np

from baselines import append_csv
from baselines.contact_events import contact_group, policies

RESULTS = Path(__file__).resolve().parent / "results"
TASKS = ("BoxPush-v0", "PlanarHand-v0")
#: What ``mj_getState`` saves of each step's start: positions, velocities, actuator
#: states, controls and the solver's warm start.
FULL_STATE = mujoco.mjtState.mjSTATE_INTEGRATION
#: A frictionloss force within this fraction of its limit counts as saturated (sliding).
SATURATED = 0.98
GROUP_FIELDS = ("env", "policy", "group", "steps", "fd_norm_p50", "fd_norm_p90", "fd_norm_p99", "fd_norm_max")
#: Finite-difference step sizes of the re-evaluated steps (tangent units: m, rad, m/s, rad/s).
FD_STEPS = (1e-8, 1e-6, 1e-4)
TOP_FIELDS = (
    "env",
    "policy",
    "group",
    "contact_force",
    "object_speed",
    "fd_norm",
    *(f"fd_norm_eps{e:g}" for e in FD_STEPS),
    "mjx_norm",
)


def friction_regimes(model: mujoco.MjModel, data: mujoco.MjData) -> Dict[int, bool]:
    """Per dof with a frictionloss constraint in ``data``: True when its force is saturated."""
    rows = np.flatnonzero(data.efc_type[: data.nefc] == mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF)
    return {
        int(data.efc_id[i]): bool(abs(data.efc_force[i]) >= SATURATED * model.dof_frictionloss[data.efc_id[i]])
        for i in rows
    }


def regime_changed(model: mujoco.MjModel, start: mujoco.MjData, ctrl: np.ndarray, substeps: int) -> bool:
    """Whether any frictionloss constraint changes regime over one control step from ``start``."""
    d = mujoco.MjData(model)
    mujoco.mj_copyData(d, model, start)
    d.ctrl[:] = ctrl
    mujoco.mj_forward(model, d)
    before = friction_regimes(model, d)
    for _ in range(substeps):
        mujoco.mj_step(model, d)
        now = friction_regimes(model, d)
        if any(before.get(k) != now.get(k) for k in set(before) | set(now)):
            return True
        before = now
    return False


def control_step_fd(
    model: mujoco.MjModel, start: mujoco.MjData, ctrl: np.ndarray, substeps: int, eps: float
) -> np.ndarray:
    """Central-difference d x_{t+1} / d x_t of one control step in MuJoCo C, x = (dq, qvel)
    in tangent coordinates (``mj_integratePos`` / ``mj_differentiatePos``): (2 nv, 2 nv)."""
    nv = model.nv

    def step(dx: np.ndarray) -> np.ndarray:
        d = mujoco.MjData(model)
        mujoco.mj_copyData(d, model, start)
        mujoco.mj_integratePos(model, d.qpos, dx[:nv], 1.0)
        d.qvel[:] += dx[nv:]
        d.ctrl[:] = ctrl
        for _ in range(substeps):
            mujoco.mj_step(model, d)
        return np.concatenate([d.qpos, d.qvel])

    def difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        dq = np.zeros(nv)
        mujoco.mj_differentiatePos(model, dq, 1.0, b[: model.nq], a[: model.nq])
        return np.concatenate([dq, a[model.nq :] - b[model.nq :]])

    columns = []
    for i in range(2 * nv):
        e = np.zeros(2 * nv)
        e[i] = eps
        columns.append(difference(step(e), step(-e)) / (2 * eps))
    return np.stack(columns, axis=1)


def measure(env_id: str, episodes: int, top: int, seed: int = 0) -> Tuple[List[dict], List[dict]]:
    """(group rows, re-evaluated top rows) for one task."""
    import gymnasium as gym

    import bcg_envs  # noqa: F401  (registers the ids)

    env = gym.make(f"bcg_envs/{env_id}", backend="mujoco")
    mjx_env = gym.make(f"bcg_envs/{env_id}")
    c, j = env.unwrapped, mjx_env.unwrapped
    model, substeps = c.model, int(c.jax_env.physics.n_substeps)
    object_dofs = np.flatnonzero(model.dof_frictionloss > 0)
    group_rows, steps = [], []
    try:
        for name, policy_for in policies(env_id, env).items():
            norms: Dict[str, List[float]] = {"onset": [], "sustained": [], "friction_switch": [], "smooth": []}
            for ep in range(episodes):
                policy = policy_for(seed + ep)
                obs, _ = env.reset(seed=seed + ep)
                before = float("inf")
                while True:
                    action = policy(obs)
                    start = mujoco.MjData(model)
                    mujoco.mj_copyData(start, model, c.data)
                    state = (c.data.qpos.copy(), c.data.qvel.copy())
                    out = env.unwrapped.grad_step(action, estimator="exact")
                    force = float(out.info["max_contact_force"])
                    group = contact_group(force, before)
                    if group == "none":
                        switched = regime_changed(model, start, c.data.ctrl, substeps)
                        group = "friction_switch" if switched else "smooth"
                    norm = float(np.linalg.norm(out.jacobians.A))
                    norms[group].append(norm)
                    # The full simulator state (warm start included), not the MjData: a
                    # few hundred bytes per step, rebuilt only for the re-evaluated steps.
                    full = np.empty(mujoco.mj_stateSize(model, FULL_STATE))
                    mujoco.mj_getState(model, start, full, FULL_STATE)
                    steps.append(
                        {
                            "policy": name,
                            "group": group,
                            "contact_force": force,
                            "fd_norm": norm,
                            "object_speed": float(np.linalg.norm(state[1][object_dofs])),
                            "state": state,
                            "action": np.asarray(action),
                            "full_state": full,
                            "ctrl": c.data.ctrl.copy(),
                        }
                    )
                    before = force
                    obs = out.observation
                    if out.terminated or out.truncated:
                        break
            for group, values in norms.items():
                v = np.asarray(values, float)
                q = (lambda p: float(np.percentile(v, p))) if len(v) else (lambda p: float("nan"))
                group_rows.append(
                    {
                        "env": env_id,
                        "policy": name,
                        "group": group,
                        "steps": len(v),
                        "fd_norm_p50": q(50),
                        "fd_norm_p90": q(90),
                        "fd_norm_p99": q(99),
                        "fd_norm_max": q(100),
                    }
                )
        top_rows = []
        if top:
            mjx_env.reset(seed=seed)
        for s in sorted(steps, key=lambda s: -s["fd_norm"])[:top]:
            start = mujoco.MjData(model)
            mujoco.mj_setState(model, start, s["full_state"], FULL_STATE)
            fd = {
                f"fd_norm_eps{e:g}": float(np.linalg.norm(control_step_fd(model, start, s["ctrl"], substeps, e)))
                for e in FD_STEPS
            }
            j.set_state(*s["state"])
            mjx = float(np.linalg.norm(j.grad_step(s["action"], estimator="exact").jacobians.A))
            top_rows.append({"env": env_id, **{k: s[k] for k in TOP_FIELDS if k in s}, **fd, "mjx_norm": mjx})
    finally:
        env.close()
        mjx_env.close()
    return group_rows, top_rows


def tables(group_rows: List[dict], top_rows: List[dict]) -> str:
    """Markdown tables of ``measure``'s rows."""
    lines = ["| env | policy | group | steps | FD ||A|| p50 / p90 / p99 / max |", "|---|---|---|---|---|"]
    for r in group_rows:
        lines.append(
            f"| {r['env']} | {r['policy']} | {r['group']} | {r['steps']} | {r['fd_norm_p50']:.3g} / "
            f"{r['fd_norm_p90']:.3g} / {r['fd_norm_p99']:.3g} / {r['fd_norm_max']:.3g} |"
        )
    eps = " | ".join(f"FD eps {e:g}" for e in FD_STEPS)
    lines += [
        "",
        f"| env | policy | group | contact force (N) | object speed | grad_step FD ||A|| | {eps} | MJX exact ||A|| |",
        "|---|---|---|---|---|---|" + "---|" * len(FD_STEPS) + "---|",
    ]
    for r in top_rows:
        fd = " | ".join(f"{r[f'fd_norm_eps{e:g}']:.3g}" for e in FD_STEPS)
        lines.append(
            f"| {r['env']} | {r['policy']} | {r['group']} | {r['contact_force']:.1f} | "
            f"{r['object_speed']:.4f} | {r['fd_norm']:.3g} | {fd} | {r['mjx_norm']:.3g} |"
        )
    return "\n".join(lines)


def main(argv=None) -> Tuple[List[dict], List[dict]]:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--env", nargs="+", default=list(TASKS), choices=TASKS, help="tasks to measure")
    parser.add_argument("--episodes", type=int, default=10, help="episodes per policy (seeds seed, seed + 1, ...)")
    parser.add_argument("--top", type=int, default=12, help="largest-norm steps re-evaluated per task")
    parser.add_argument("--seed", type=int, default=0, help="first episode seed")
    parser.add_argument("--out", default=str(RESULTS), help="folder the CSVs are appended to (empty: none)")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    if args.top < 0:
        parser.error(f"--top must be >= 0, got {args.top}")
    groups, tops = [], []
    for env_id in args.env:
        start = time.perf_counter()
        g, t = measure(env_id, args.episodes, args.top, args.seed)
        print(tables(g, t) + f"\n({env_id}: {time.perf_counter() - start:.0f} s)\n", flush=True)
        groups, tops = groups + g, tops + t
    if args.out:
        append_csv(Path(args.out) / "friction_switches.csv", GROUP_FIELDS, groups)
        append_csv(Path(args.out) / "friction_switches_top.csv", TOP_FIELDS, tops)
    return groups, tops


if __name__ == "__main__":
    main()
