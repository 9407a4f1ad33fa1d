"""Gradient pathology sweep: how rollout gradients degrade with contact stiffness and horizon.

    python -m baselines.gradient_variance --env BoxPush-v0 --contact-model both \
        --estimators exact bundle zeroth bcg alpha --starts 64 --horizons 1 8 32 64

The BCG authors' Moreau contact model and its decomposition (which of its differences
makes exact gradients explode): each variant is one run, appending to the same CSV::

    python -m baselines.gradient_variance --env BoxPush-v0 --contact-model moreau --estimators exact bcg
    python -m baselines.gradient_variance --env BoxPush-v0 --contact-model moreau --estimators exact bcg \
        --contact-options midpoint=False
    python -m baselines.gradient_variance --env BoxPush-v0 --contact-model moreau --estimators exact bcg \
        --contact-options friction=regularized
    python -m baselines.gradient_variance --env BoxPush-v0 --contact-model moreau --estimators exact bcg \
        --contact-options midpoint=False friction=regularized --physics-dt 0.002

Measured quantity: the gradient of the H-step return (the sum of the first H rewards) with
respect to the open-loop action sequence, flattened over the first H actions: what a
first-order learner such as SHAC backpropagates. Rollouts run ``env.step`` inside
``lax.scan``; reverse mode through it gives the env's estimator (``make_jax(...,
estimator=...)``). One compiled program per (contact model, estimator) covers every
horizon and every stiffness level: it rolls max(H) steps once and pulls back the vector of
partial returns (one cotangent per horizon), and takes the level as an argument
(``env.with_contact_stiffness`` inside ``jit``), so a sweep compiles each estimator once.

Start states (``--starts``, default 64): BoxPush-v0 and PlanarHand-v0 reset with seeds
0, 1, ... and run the task's scripted controller on MuJoCo C with the task's default
contact; a start is the state ``--lead-steps`` control steps before the first step whose
``info["max_contact_force"]`` exceeds ``--contact-threshold`` (N): just before the
pusher's strike or the fingertips' impact. Its action sequence is the controller's
actions from there (open loop, zero after the episode ends). G1Jump-v0 (optional,
expensive; 16 starts by default): reference states ``--lead-steps``, +1, ... frames before
the landing's touchdown (joint velocities jittered for repeats), with zero residual actions
(the reference pose). The same starts (cached in ``gradient_variance_starts_*.npz``) serve every level and
contact model. Each start has its own PRNG seed for the estimators' samples.

Policy starts (``--starts-policy PATH.npz``, every task): the same search
(seeds 0, 1, ..., MuJoCo C, ``--lead-steps`` before the first contact above
``--contact-threshold``; on G1Jump-v0 the first such contact after a step without any, the
landing's touchdown, with the reference frame of that step as the start's ``ref_start``)
in episodes of an exported trained policy (``bcg_envs.export``,
e.g. ``assets/policies/BoxPush-v0.npz``, run deterministically) in place of the scripted
controller, each start's action sequence being the policy's actions from there: the
states a learner's policy actually visits. Their cache ends in ``_policy-<stem>.npz``,
the CSV's ``starts_source`` names the policy file, their data files end in
``_policy-<stem>``, and their figure panels carry ``policy-<stem>``; a restart skips only
blocks of the same starts (rows without a policy in ``starts_source`` count as scripted),
so scripted and policy runs share one ``--out`` without skipping each other's blocks.

Contact models and levels (``--contact-model``, one or more; ``both``: mujoco and penalty;
``--levels``): ``mujoco``, MuJoCo's soft constraints with ``solref`` time constants 0.05 ...
0.002 s (smaller is stiffer) at a 1 ms physics timestep (``--physics-dt``); ``penalty``, the
BCG paper's penalty contact with sharpness kappa 50 ... 500 /m (larger is stiffer) at the
task's timestep; ``moreau``, the authors' Moreau contact model
(``bcg_envs/physics/moreau_contact.py``) with kappa 50, 100, 300, 1000, 3000 /m at the
task's timestep under it (``--physics-dt`` overrides). ``--contact-options KEY=VALUE ...``
sets the penalty and moreau models' other parameters (``contact_options`` of ``make_jax``;
e.g. ``midpoint=False``, ``friction=regularized``, ``prox_iterations=50``): the CSV's
``contact_options`` column records them (``midpoint=False``; "" for the defaults) and the
data files' names carry them, so that variants share one CSV and one output folder.

Per (contact model, level, estimator, horizon), over the starts: the mean gradient norm;
the total variance (sum over coordinates of the per-coordinate variance across starts,
float64) with a bootstrap 95 % interval (resampling starts); the variance ratio to
``exact`` at the same level and horizon with a paired bootstrap interval; the mean cosine
and mean relative error ``|g - g_ref| / |g_ref|`` to a smoothed reference, per start the
mean of exact gradients at ``--reference-samples`` (default 16; each costs one exact
block) copies of the start jittered by the bundle's sigmas (1 cm in positions, 2 cm/s in
velocities; quaternions untouched), with the start's own action sequence; the
fraction of steps bundled; the control-step simulations per env step of the cost model
(``simulations_per_step``); the wall time per start of the all-horizon gradient after
compile (``compile_s``: the program's compile time, shared by every level of its
contact model). Non-finite gradients are counted (``nonfinite``) and left out of the statistics.

Outputs in ``--out`` (default ``baselines/results/<env>/``): ``gradient_variance.csv``,
append-only, one block of rows per (contact model, contact options, physics_dt, level,
estimator), skipped when a run restarts (a CSV from before the ``contact_options`` column
reads as the defaults and gains the column on the next append); per-block gradients and
references under ``gradient_variance_data/``; figures with one row of panels per (contact
model, options, physics_dt):
``gradient_variance_ratio.png`` (variance ratio to exact) and ``gradient_variance_raw.png``
(raw variance; values far above exact's largest, or non-finite, clipped to the top and marked).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import List, Optional

from baselines.gradient_variance_contact import CONTACT_MODELS, parse_contact_options, select_models
from baselines.gradient_variance_csv import read_rows
from baselines.gradient_variance_figures import write_figures
from baselines.gradient_variance_gradients import ESTIMATORS
from baselines.gradient_variance_starts import find_starts
from baselines.gradient_variance_sweep import sweep

HORIZONS = (1, 8, 32, 64)
#: Default starts per env (G1 rollouts cost ~30x BoxPush's).
DEFAULT_STARTS = {"BoxPush-v0": 64, "PlanarHand-v0": 64, "G1Jump-v0": 16}
ENVS = ("BoxPush-v0", "PlanarHand-v0", "G1Jump-v0")


def main(argv: Optional[List[str]] = None) -> List[dict]:
    """Run the sweep of the command line ``argv``; returns the rows it added."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="BoxPush-v0", choices=ENVS)
    parser.add_argument(
        "--contact-model",
        nargs="+",
        default=["both"],
        choices=[*CONTACT_MODELS, "both"],
        help="one or more; both: mujoco and penalty (default)",
    )
    parser.add_argument(
        "--levels", nargs="+", default=None, help="override: 0.004 0.002 or mujoco=0.004 penalty=300 moreau=1000"
    )
    parser.add_argument(
        "--physics-dt",
        type=float,
        default=None,
        help="physics timestep (s) of the mujoco model (default 0.001) and the moreau model (default the "
        "task's); 0: the task's. The penalty model always uses the task's",
    )
    parser.add_argument(
        "--contact-options",
        nargs="+",
        default=None,
        metavar="KEY=VALUE",
        help="contact_options of the penalty/moreau models, e.g. midpoint=False friction=regularized "
        "(true/false: bools; numbers: int/float); recorded in the CSV's contact_options column",
    )
    parser.add_argument(
        "--estimators", nargs="+", default=None, choices=ESTIMATORS, help="default: all (exact bcg with --quick)"
    )
    parser.add_argument("--horizons", nargs="+", type=int, default=list(HORIZONS))
    parser.add_argument("--starts", type=int, default=None, help="start states (default 64; 16 on G1Jump-v0)")
    parser.add_argument(
        "--reference-samples",
        type=int,
        default=16,
        help="jittered exact gradients per start in the reference (each sample costs one exact block)",
    )
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument(
        "--contact-threshold", type=float, default=None, help="N; the contact event of a scripted or policy episode"
    )
    parser.add_argument("--lead-steps", type=int, default=2, help="control steps between a start and its contact event")
    parser.add_argument(
        "--starts-policy",
        default=None,
        metavar="PATH.npz",
        help="find the starts in episodes of this exported policy (bcg_envs.export, deterministic; e.g. "
        "assets/policies/BoxPush-v0.npz) instead of the scripted controller's (G1Jump-v0: the reference "
        "frames'); on G1Jump-v0 the event is the first touchdown after a flight",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="1 level per model, 4 starts, horizons 1 4, exact and bcg, 2 reference samples",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.starts, args.horizons, args.reference_samples, args.resamples = 4, [1, 4], 2, 200
        args.estimators = args.estimators or ["exact", "bcg"]
    out_dir = Path(args.out or f"baselines/results/{args.env}")
    n = args.starts or DEFAULT_STARTS[args.env]
    horizons = sorted(set(args.horizons))
    try:
        options = parse_contact_options(args.contact_options)
        models = select_models(args.contact_model, args.levels, args.physics_dt, args.quick, options)
        if args.starts_policy is not None:
            if not Path(args.starts_policy).is_file():
                raise ValueError(f"--starts-policy {args.starts_policy}: no such file")
    except ValueError as e:
        parser.error(str(e))
    read_rows(out_dir)  # fail early on a CSV of another format
    starts = find_starts(
        args.env, n, max(horizons), out_dir, args.contact_threshold, args.lead_steps, policy=args.starts_policy
    )
    print(
        f"{args.env}: {len(starts)} starts ({starts.source}); horizons {horizons}; "
        + "; ".join(f"{m.label} levels {list(m.levels)} physics_dt {m.physics_dt or 'task'}" for m in models),
        flush=True,
    )
    rows = sweep(
        args.env,
        models,
        args.estimators or list(ESTIMATORS),
        starts,
        horizons,
        out_dir,
        reference_samples=args.reference_samples,
        resamples=args.resamples,
    )
    write_figures(out_dir)
    return rows


if __name__ == "__main__":
    main()
