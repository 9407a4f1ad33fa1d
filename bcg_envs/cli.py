"""Command line: ``bcg-envs list | demo | train | evaluate | gradcheck | bench``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional


def _cmd_list(args) -> None:
    import bcg_envs

    for env_id in bcg_envs.list_envs():
        print(env_id)


def _cmd_demo(args) -> None:
    from bcg_envs import demo

    demo.main(out_dir=args.out, steps=args.steps, seed=args.seed, train_steps=args.train_steps, backend=args.backend)


def _cmd_train(args) -> None:
    from bcg_envs.learners.runs import train_run

    result = train_run(args.env, algo=args.algo, estimator=args.estimator, steps=args.steps, seed=args.seed, out_dir=args.out)
    print(json.dumps(result, indent=2, default=str))


def _cmd_evaluate(args) -> None:
    if args.sim == "mujoco":
        from bcg_envs.learners.runs import sim_to_sim_run

        print(json.dumps(sim_to_sim_run(args.run, episodes=args.episodes), indent=2, default=str))
        return
    from bcg_envs.learners.runs import evaluate_run

    print(json.dumps(evaluate_run(args.run, episodes=args.episodes, video=args.video), indent=2, default=str))


def _cmd_gradcheck(args) -> None:
    from bcg_envs.gradcheck import run

    ok = run(args.env, states=args.states, seed=args.seed)
    sys.exit(0 if ok else 1)


def _cmd_bench(args) -> None:
    from bcg_envs import bench

    if "step" in args.tables:
        print(bench.report(bench.run(args.env, num_envs=args.num_envs, estimators=args.estimators)), flush=True)
    if "rollout" in args.tables:
        rows = bench.rollout_gradients(
            args.env, num_envs=args.rollout_envs, horizon=args.horizon, estimators=args.estimators, backwards=args.backward
        )
        print(bench.report_rollout_gradients(rows, args.env, args.rollout_envs, args.horizon))


def build_parser() -> argparse.ArgumentParser:
    from bcg_envs.gradients.config import ESTIMATORS

    parser = argparse.ArgumentParser(prog="bcg-envs", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="registered environment ids").set_defaults(fn=_cmd_list)

    p = sub.add_parser("demo", help="gradient statistics of every estimator on BoxPush (+ plot, video)")
    p.add_argument("--out", default="demo_out")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-steps", type=int, default=0, help="also train SB3 PPO vs SHAC exact vs SHAC bcg for this many env steps")
    p.add_argument("--backend", choices=["mujoco", "mjx"], default="mujoco", help="physics of the gradient table (mjx: one compile per estimator)")
    p.set_defaults(fn=_cmd_demo)

    p = sub.add_parser("train", help="train a policy")
    p.add_argument("--env", default="BoxPush-v0")
    p.add_argument("--algo", default="shac", choices=["shac"])
    p.add_argument("--estimator", default="bcg", choices=list(ESTIMATORS))
    p.add_argument("--steps", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=_cmd_train)

    p = sub.add_parser("evaluate", help="evaluate a trained run")
    p.add_argument("--run", required=True)
    p.add_argument("--episodes", type=int, default=5)
    p.add_argument("--video", default=None)
    p.add_argument("--sim", default="mjx", choices=["mjx", "mujoco"])
    p.set_defaults(fn=_cmd_evaluate)

    p = sub.add_parser("gradcheck", help="exact Jacobians vs MuJoCo C finite differences")
    p.add_argument("--env", default="BoxPush-v0")
    p.add_argument("--states", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=_cmd_gradcheck)

    p = sub.add_parser("bench", help="step / grad_step cost and batched throughput")
    p.add_argument("--env", default="BoxPush-v0")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=list(ESTIMATORS))
    p.add_argument("--tables", nargs="+", default=["step", "rollout"], choices=["step", "rollout"],
                   help="step: step/grad_step cost and vmap throughput; rollout: rollout-gradient cost (default: both)")
    p.add_argument("--rollout-envs", type=int, default=16, help="vmapped envs of the rollout-gradient table (default 16)")
    p.add_argument("--horizon", type=int, default=32, help="control steps of the rollout-gradient table (default 32)")
    p.add_argument("--backward", nargs="+", default=["vjp", "jacobians"], choices=["vjp", "jacobians"],
                   help="backward passes to time: vjp (reverse mode, used in training) and jacobians (transposed "
                   "full Jacobians, the previous design) (default: both)")
    p.set_defaults(fn=_cmd_bench)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    from bcg_envs.utils import single_cpu_client

    single_cpu_client()  # avoid the 2-core batched-kernel deadlock (DESIGN.md section 4)
    args.fn(args)


if __name__ == "__main__":
    main()
