"""Command line: ``bcg-envs list | demo | train | evaluate | export | gradcheck | bench``.

Bad input (a missing run folder, an unknown env id, a budget below 1, ...) ends the
command with one ``bcg-envs: error: ...`` line on stderr and exit status 2, as argparse's
own errors, before anything is written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

#: The parser's description (``--help``).
DESCRIPTION = (
    "Differentiable MuJoCo environments with Bundled Contact Gradients: list the envs, run the demo, "
    "train, evaluate and export SHAC policies, check and time the gradients."
)
#: Exit status of a command refused for bad input (argparse's).
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad command-line input: ``main`` prints it as one ``bcg-envs: error: ...`` line and
    exits with status ``EXIT_USAGE``."""


def plain_text(text: str) -> str:
    """``text`` with its reStructuredText literals (a word between double backticks, as
    docstrings write code) as the plain word, for ``--help``."""
    return re.sub(r"``(.+?)``", r"\1", text, flags=re.S)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to every option's help, except where the default is None;
    prints docstring text plain (``plain_text``)."""

    def _get_help_string(self, action):
        if action.default is None:
            return action.help
        return super()._get_help_string(action)

    def _format_text(self, text):
        return super()._format_text(plain_text(text))

    def _expand_help(self, action):
        return plain_text(super()._expand_help(action))


def check_env_id(env_id: str, option: str = "--env") -> str:
    """``env_id`` if registered, else ``UsageError`` naming ``option`` and the registered ids."""
    from bcg_envs.registry import short_name

    try:
        short_name(env_id)
    except ValueError as err:
        raise UsageError(f"{option}: {err}") from None
    return env_id


def check_positive(value: Optional[int], option: str, what: str) -> None:
    """``UsageError`` unless ``value`` is None or >= 1."""
    if value is not None and value < 1:
        raise UsageError(f"{option} must be a positive integer ({what}), got {value}")


def check_run_folder(run: str, option: str = "--run") -> Path:
    """The finished run folder ``run`` (``config.json`` and ``params.msgpack`` in it), else
    ``UsageError`` naming ``option``."""
    path = Path(run)
    if not path.is_dir():
        raise UsageError(f"{option} {run}: no such folder (give a run folder written by bcg-envs train)")
    missing = [name for name in ("config.json", "params.msgpack") if not (path / name).is_file()]
    if missing:
        raise UsageError(f"{option} {run}: not a finished run folder ({' and '.join(missing)} missing)")
    return path


def env_table(env_ids: Optional[List[str]] = None) -> str:
    """Id, observation size, action size, control rate (Hz) and episode length of each env.

    Sizes come from building each env with ``make_jax`` (the observation size traces one
    reset with ``jax.eval_shape``, no compile); the G1 ids take a few seconds each.
    """
    import bcg_envs

    rows = [("id", "obs", "act", "control Hz", "episode steps")]
    for env_id in env_ids or bcg_envs.list_envs():
        env = bcg_envs.make_jax(env_id)
        rows.append(
            (env_id, str(env.observation_size), str(env.action_size), f"{1.0 / env.dt:g}", str(env.episode_length))
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def _cmd_list(args) -> None:
    import bcg_envs

    if args.ids_only:
        for env_id in bcg_envs.list_envs():
            print(env_id)
        return
    print(env_table())


def _cmd_demo(args) -> None:
    check_positive(args.steps, "--steps", "control steps")
    check_positive(args.boxpush_episodes, "--boxpush-episodes", "episodes")
    check_positive(args.g1jump_episodes, "--g1jump-episodes", "episodes")
    from bcg_envs import demo

    demo.main(
        out_dir=args.out,
        steps=args.steps,
        seed=args.seed,
        backend=args.backend,
        sections=args.sections,
        boxpush_episodes=args.boxpush_episodes,
        g1jump_episodes=args.g1jump_episodes,
        video=not args.no_video,
    )


#: ``shac.train`` keywords that ``--config``/``--set`` may not give, and the option to use.
_TRAIN_RESERVED = {
    "environment": "--env",
    "num_timesteps": "--steps",
    "total_steps": "--steps",
    "estimator": "--estimator",
    "seed": "--seed",
    "progress_fn": "(a Python callable, not settable here)",
    "devices": "(JAX devices, not settable here)",
    "program_cache": "(a Python object, not settable here)",
}
DEFAULT_TRAIN_STEPS = 200_000


def train_keywords() -> List[str]:
    """The ``shac.train`` keywords that ``train --config``/``--set`` accept."""
    import inspect

    from bcg_envs.learners import shac

    params = inspect.signature(shac.train).parameters
    return [n for n, p in params.items() if p.kind == p.KEYWORD_ONLY and n not in _TRAIN_RESERVED]


def parse_set(items: Optional[List[str]]) -> Dict[str, Any]:
    """``["key=value", ...]`` -> dict; values parse as JSON, else stay strings."""
    out: Dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def check_train_kwargs(kwargs: Dict[str, Any], source: str) -> Dict[str, Any]:
    """Raise ``ValueError`` naming ``source`` for keys ``shac.train`` does not take here."""
    valid = train_keywords()
    for key in kwargs:
        if key in _TRAIN_RESERVED:
            raise ValueError(f"{source}: {key!r} is set by {_TRAIN_RESERVED[key]}, not by --config/--set")
        if key not in valid:
            raise ValueError(f"{source}: unknown shac.train keyword {key!r}; valid keys: {', '.join(valid)}")
    return kwargs


def train_settings(args: argparse.Namespace) -> Dict[str, Any]:
    """``train_run`` arguments from the parsed ``train`` options (``ValueError`` if invalid).

    Learner keywords are layered: the resumed run's settings, then ``--config``, then
    ``--set``. With ``--resume DIR`` the env, estimator, seed and budget are the run's
    own (``--steps`` may raise the budget) and training restarts from its newest checkpoint.
    """
    kwargs: Dict[str, Any] = {}
    env_id, estimator, seed = args.env, args.estimator, args.seed
    steps, out = args.steps, args.out
    if steps is not None and steps < 1:
        raise ValueError(f"--steps must be a positive integer (env steps), got {steps}")
    if args.resume is None:
        from bcg_envs.registry import short_name

        try:
            short_name(env_id)
        except ValueError as err:
            raise ValueError(f"--env: {err}") from None
    if args.resume is not None:
        from bcg_envs.learners.shac import latest_checkpoint

        run = Path(args.resume)
        if not run.is_dir():
            raise ValueError(f"--resume {run}: no such folder (give a run folder written by bcg-envs train)")
        if not (run / "config.json").exists():
            raise ValueError(f"--resume {run}: not a run folder (no config.json)")
        if out is not None and Path(out).resolve() != run.resolve():
            raise ValueError(f"--resume continues the run in place; drop --out {out} or make it {run}")
        config = json.loads((run / "config.json").read_text())
        learner = dict(config.get("learner", {}))
        saved_ckpt = learner.get("checkpoint_dir")
        ckpt_dir = run / "checkpoints"
        if not ckpt_dir.is_dir() and isinstance(saved_ckpt, str) and Path(saved_ckpt).is_dir():
            ckpt_dir = Path(saved_ckpt)
        try:
            latest_checkpoint(ckpt_dir)
        except FileNotFoundError as err:
            raise ValueError(f"--resume: {err}") from None
        valid = set(train_keywords())
        drop = ("log_dir", "checkpoint_dir", "restore_from")
        kwargs = {k: v for k, v in learner.items() if k in valid and k not in drop}
        if kwargs.get("bundle") is None:
            kwargs.pop("bundle", None)
        env_id, estimator, seed = config["env_id"], config["estimator"], int(config["seed"])
        steps = steps if steps is not None else int(config["steps"])
        out = str(run)
        kwargs["restore_from"] = str(ckpt_dir)
    elif out is None:
        raise ValueError("--out is required (the run folder to write), unless --resume DIR is given")
    if args.config is not None:
        path = Path(args.config)
        try:
            loaded = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"--config {path}: not a readable JSON file ({err})") from None
        if not isinstance(loaded, dict):
            raise ValueError(
                f"--config {path}: expected a JSON object of shac.train keywords, got {type(loaded).__name__}"
            )
        kwargs.update(check_train_kwargs(loaded, f"--config {path}"))
    kwargs.update(check_train_kwargs(parse_set(args.set), "--set"))
    bundle = kwargs.get("bundle")
    if isinstance(bundle, str):
        raise ValueError(
            f"bundle {bundle!r} is not a BundleConfig; give its fields as JSON: --set 'bundle={{\"num_samples\": 10}}'"
        )
    if isinstance(bundle, dict):
        from bcg_envs.gradients.config import BundleConfig

        kwargs["bundle"] = BundleConfig(**bundle)
    steps = DEFAULT_TRAIN_STEPS if steps is None else int(steps)
    return dict(env_id=env_id, algo=args.algo, estimator=estimator, steps=steps, seed=seed, out_dir=out, **kwargs)


def _duration(seconds: float) -> str:
    """``"42 s"``, ``"3 min 05 s"`` or ``"1 h 02 min"``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _folder_listing(out: Path) -> str:
    """The run folder's entries, TensorBoard event files as one item."""
    names = [p.name + ("/" if p.is_dir() else "") for p in sorted(out.iterdir())]
    events = [n for n in names if n.startswith("events.out.tfevents")]
    return ", ".join([n for n in names if n not in events] + (["TensorBoard events"] if events else []))


def train_summary(metrics: Dict[str, Any], settings: Dict[str, Any], seconds: float) -> str:
    """The few lines ``train`` ends with: what ran, the final evaluation, the run folder
    and the commands that take it further (every metric stays in ``metrics.json``)."""
    out = Path(settings["out_dir"])
    lines = [
        f"done in {_duration(seconds)}: SHAC ({settings['estimator']} gradients) on {settings['env_id']}, "
        f"{int(metrics.get('num_steps', 0)):,} env steps, seed {settings['seed']}"
    ]
    if "eval/episode_reward" in metrics:
        try:
            episodes = json.loads((out / "config.json").read_text())["learner"]["num_eval_envs"]
        except (OSError, KeyError, ValueError):
            episodes = settings.get("num_eval_envs", "?")
        lines.append(
            f"final evaluation ({episodes} episodes, deterministic policy): return "
            f"{metrics['eval/episode_reward']:.1f}, success {100 * metrics.get('eval/success', 0.0):.0f} %"
        )
    else:
        reward = metrics.get("episode_reward")
        last = (
            f"return of the last training episodes {reward:.1f}"
            if isinstance(reward, (int, float))
            else "no return yet"
        )
        lines.append(f"no evaluation (num_evals=0); {last}")
    lines.append(f"run folder: {out.resolve()} ({_folder_listing(out)})")
    lines.append(
        f"next: bcg-envs evaluate --run {out}  |  bcg-envs export --run {out}  |  "
        f"bcg-envs train --resume {out} --steps N"
    )
    return "\n".join(lines)


def _cmd_train(args) -> None:
    from bcg_envs.learners.runs import train_run

    try:
        settings = train_settings(args)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from None
    env_id = settings["env_id"]
    out = Path(settings["out_dir"])
    resumed = " (resumed from its newest checkpoint)" if "restore_from" in settings else ""
    print(
        f"training SHAC ({settings['estimator']} gradients) on {env_id} for {settings['steps']:,} env steps, "
        f"seed {settings['seed']}, into {out}{resumed}"
    )
    print(
        "compiling the training programs (a minute or more on a CPU the first time; the compile cache "
        "keeps them for the next run) ...",
        flush=True,
    )
    start = time.perf_counter()
    kwargs = {k: v for k, v in settings.items() if k != "env_id"}
    progress = out / "progress.csv"
    logged = progress.stat().st_mtime_ns if progress.exists() else None
    try:
        result = train_run(env_id, **kwargs)
    except (ValueError, TypeError) as err:
        if progress.exists() and progress.stat().st_mtime_ns != logged:
            raise  # training had started: not an input error, keep the traceback
        raise UsageError(str(err)) from None
    print(train_summary(result, settings, time.perf_counter() - start))


def _cmd_evaluate(args) -> None:
    check_run_folder(args.run)
    check_positive(args.episodes, "--episodes", "full episodes")
    if args.sim == "mujoco":
        from bcg_envs.learners.runs import sim_to_sim_run

        print(json.dumps(sim_to_sim_run(args.run, episodes=args.episodes), indent=2, default=str))
        return
    from bcg_envs.learners.runs import evaluate_run

    print(json.dumps(evaluate_run(args.run, episodes=args.episodes, video=args.video), indent=2, default=str))


def _cmd_gradcheck(args) -> None:
    check_env_id(args.env)
    check_positive(args.states, "--states", "states to check")
    from bcg_envs.gradcheck import run

    checks = run(args.env, states=args.states, seed=args.seed)
    sys.exit(0 if all(c.within for c in checks) else 1)


#: The estimators of ``bench --tables shac`` (of those given by ``--estimators``): the
#: exact baseline and the paper's estimator, one SHAC compile each.
SHAC_TABLE_ESTIMATORS = ("exact", "bcg")


def _cmd_bench(args) -> None:
    check_env_id(args.env)
    from bcg_envs import bench

    print(f"bcg-envs bench, {args.env}, device: {bench.device_summary()}", flush=True)
    if "step" in args.tables:
        print(bench.report(bench.run(args.env, num_envs=args.num_envs, estimators=args.estimators)), flush=True)
    if "rollout" in args.tables:
        rows = bench.rollout_gradients(
            args.env,
            num_envs=args.rollout_envs,
            horizon=args.horizon,
            estimators=args.estimators,
            backwards=args.backward,
        )
        print(bench.report_rollout_gradients(rows, args.env, args.rollout_envs, args.horizon), flush=True)
    if "backends" in args.tables:
        print(bench.report_backend_latency(bench.backend_latency(args.env), args.env), flush=True)
    if "threads" in args.tables:
        print(bench.report_cpu_threads(bench.cpu_threads(args.env, num_envs=args.num_envs), args.env), flush=True)
    if "shac" in args.tables:
        rows = bench.shac_iterations(
            args.env,
            num_envs=args.rollout_envs,
            horizon=args.horizon,
            estimators=[e for e in args.estimators if e in SHAC_TABLE_ESTIMATORS] or ["exact"],
        )
        print(bench.report_shac_iterations(rows, args.env, args.rollout_envs, args.horizon))


def export_source(args: argparse.Namespace) -> Tuple[str, Path, str]:
    """``("run", folder, format)`` or ``("policy", file, format)`` from ``export``'s options
    (``--format``, else npz for ``--run`` and onnx for ``--policy``); ``UsageError`` unless
    exactly one of ``--run`` and ``--policy`` is given and names a folder or file."""
    if (args.run is None) == (args.policy is None):
        given = "both" if args.run is not None else "neither"
        raise UsageError(
            f"export takes exactly one of --run DIR (a SHAC run folder) and --policy FILE.npz "
            f"(an exported policy to convert), got {given}"
        )
    if args.run is not None:
        return "run", check_run_folder(args.run), args.format or "npz"
    fmt = args.format or "onnx"
    if fmt == "npz":
        raise UsageError(f"--policy {args.policy} is an .npz already; --policy converts one to --format onnx")
    path = Path(args.policy)
    if not path.is_file():
        raise UsageError(
            f"--policy {args.policy}: no such file (give a .npz written by bcg-envs export, "
            "baselines.export_sb3 or baselines.export_shac)"
        )
    return "policy", path, fmt


def _cmd_export(args) -> None:
    kind, source, fmt = export_source(args)
    from bcg_envs import export

    if kind == "run":
        out = Path(args.out) if args.out is not None else source / f"policy.{fmt}"
        arrays = export.run_policy_arrays(source)
    else:
        out = Path(args.out) if args.out is not None else source.with_suffix(f".{fmt}")
        try:
            arrays = export.read_policy_arrays(source)
            export.NumpyPolicy(arrays)
        except (OSError, ValueError, KeyError) as err:
            raise UsageError(f"--policy {source}: not a policy file of bcg_envs.export ({err})") from None
    try:
        path = export.write_policy(arrays, out, format=fmt)
    except ImportError as err:
        raise UsageError(f"--format {fmt}: {err}") from None
    policy = export.NumpyPolicy(arrays)
    print(
        f"wrote {path} (env {policy.env_id or '?'}, layer sizes {policy.layer_sizes}, {policy.activation}, "
        f"layer norm {policy.layer_norm}, observation normalizer {policy.normalize_observations}, "
        f"output {policy.output})"
    )
    if fmt == "onnx":
        print(
            "use: import onnxruntime; action = onnxruntime.InferenceSession(path).run(['action'], "
            f"{{'obs': obs}})[0]  (obs: float32, shape (batch, {policy.observation_size}))"
        )
    else:
        print("use: from bcg_envs.export import NumpyPolicy; action = NumpyPolicy.load(path)(obs)")


def _add_list(sub: argparse._SubParsersAction) -> None:
    """The ``list`` command's arguments."""
    p = sub.add_parser("list", help="registered environment ids with observation/action sizes and control rate")
    p.add_argument("--ids-only", action="store_true", help="print only the ids (builds no env)")
    p.set_defaults(fn=_cmd_list)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    """The ``demo`` command's arguments."""
    p = sub.add_parser(
        "demo",
        help="the README's demo: gradients of every estimator, shipped BoxPush and G1Jump policies",
        description="Three sections and a summary: gradient statistics of every estimator along a "
        "scripted BoxPush push (table, plot, video); the shipped SB3 PPO and SHAC exact policies of "
        "BoxPush beside the scripted push and doing nothing (plot, side-by-side video); the same "
        "for G1Jump beside the reference replay and a frozen pose (plot). About 4 minutes on 2 CPU cores.",
    )
    p.add_argument("--out", default="demo_out", help="folder for the tables, plots, videos and summary")
    p.add_argument(
        "--sections",
        nargs="+",
        default=["gradients", "boxpush", "g1jump"],
        choices=["gradients", "boxpush", "g1jump"],
        metavar="SECTION",
        help="sections to run, of: gradients boxpush g1jump",
    )
    p.add_argument(
        "--steps", type=int, default=100, help="control steps of the scripted push the gradients are taken along"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the rollout and the estimators' samples")
    p.add_argument(
        "--backend",
        choices=["mujoco", "mjx"],
        default="mujoco",
        help="physics of the gradient table (mjx: one compile per estimator)",
    )
    p.add_argument("--boxpush-episodes", type=int, default=64, metavar="N", help="BoxPush episodes per policy")
    p.add_argument("--g1jump-episodes", type=int, default=192, metavar="N", help="G1Jump episodes per policy")
    p.add_argument("--no-video", action="store_true", help="write no videos (the push rollout, the BoxPush policies)")
    p.set_defaults(fn=_cmd_demo)


def _add_train(sub: argparse._SubParsersAction) -> None:
    """The ``train`` command's arguments."""
    from bcg_envs.gradients.registry import ESTIMATORS

    p = sub.add_parser(
        "train",
        help="train a policy (writes a run folder)",
        description="Train a SHAC policy; the run folder gets config.json, params.msgpack, metrics.json, "
        "progress.csv and checkpoints/. Learner settings (bcg_envs.learners.shac.train keywords): "
        "the env's defaults, then --config, then --set.",
    )
    p.add_argument("--env", default="BoxPush-v0", help="environment id (see bcg-envs list)")
    p.add_argument("--algo", default="shac", choices=["shac"], help="learner")
    p.add_argument(
        "--estimator", default="bcg", choices=list(ESTIMATORS), help="gradient estimator of the step's backward pass"
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"env-step budget (default: {DEFAULT_TRAIN_STEPS} for a new run, the run's own with --resume)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of networks, envs and the training random stream")
    p.add_argument("--out", default=None, help="run folder to write (required unless --resume)")
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help='JSON object of shac.train keyword arguments, e.g. {"num_envs": 32, "actor_hidden": [64, 64]}',
    )
    p.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=None,
        help="one shac.train keyword (repeatable, applied after --config); VALUE is parsed as JSON, "
        "else kept as a string, e.g. --set horizon=16 --set actor_hidden=[64,64]",
    )
    p.add_argument(
        "--resume",
        metavar="DIR",
        default=None,
        help="continue the run in DIR from its newest checkpoint with its own env, estimator, seed and "
        "settings (a larger --steps extends it; its learning-rate schedule then stretches)",
    )
    p.set_defaults(fn=_cmd_train)


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    """The ``evaluate`` command's arguments."""
    p = sub.add_parser("evaluate", help="evaluate a trained run")
    p.add_argument("--run", required=True, help="run folder written by bcg-envs train")
    p.add_argument("--episodes", type=int, default=5, help="full episodes of the deterministic policy")
    p.add_argument("--video", default=None, help="also write the first episode as this mp4 file")
    p.add_argument(
        "--sim",
        default="mjx",
        choices=["mjx", "mujoco"],
        help="mjx: the JAX env; mujoco: the MuJoCo C transfer check next to MJX",
    )
    p.set_defaults(fn=_cmd_evaluate)


def _add_export(sub: argparse._SubParsersAction) -> None:
    """The ``export`` command's arguments."""
    from bcg_envs.export import FORMATS

    p = sub.add_parser(
        "export",
        help="write a trained policy as a framework-free file (.npz or ONNX)",
        description="Write a SHAC run's deterministic policy (observation normalizer included) as .npz "
        "(run it with bcg_envs.export.NumpyPolicy.load(path)(obs)) or as ONNX (input obs, output action; "
        'needs pip install "/path/to/bcg_envs[onnx]"), or convert an exported .npz (a shipped policy of '
        "assets/policies, one from baselines.export_sb3) to ONNX. Give exactly one of --run "
        "and --policy.",
    )
    p.add_argument("--run", default=None, metavar="DIR", help="run folder written by bcg-envs train")
    p.add_argument("--policy", default=None, metavar="FILE", help="exported policy .npz to convert to --format onnx")
    p.add_argument(
        "--format",
        default=None,
        choices=list(FORMATS),
        help="file format: npz or onnx (default: npz for --run, onnx for --policy)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="file to write (default: DIR/policy.FORMAT for --run, the --policy file with suffix .onnx)",
    )
    p.set_defaults(fn=_cmd_export)


def _add_gradcheck(sub: argparse._SubParsersAction) -> None:
    """The ``gradcheck`` command's arguments."""
    p = sub.add_parser("gradcheck", help="exact Jacobians vs MuJoCo C finite differences")
    p.add_argument("--env", default="BoxPush-v0", help="environment id")
    p.add_argument("--states", type=int, default=5, help="states along a random rollout to check")
    p.add_argument("--seed", type=int, default=0, help="seed of the random rollout")
    p.set_defaults(fn=_cmd_gradcheck)


def _add_bench(sub: argparse._SubParsersAction) -> None:
    """The ``bench`` command's arguments."""
    from bcg_envs.gradients.registry import ESTIMATORS

    p = sub.add_parser("bench", help="step / grad_step cost and batched throughput")
    p.add_argument("--env", default="BoxPush-v0", help="environment id")
    p.add_argument("--num-envs", type=int, default=64, help="vmapped envs of the batched-throughput rows")
    p.add_argument(
        "--estimators", nargs="+", default=list(ESTIMATORS), choices=list(ESTIMATORS), help="estimators to time"
    )
    p.add_argument(
        "--tables",
        nargs="+",
        default=["step", "rollout"],
        choices=["step", "rollout", "shac", "threads", "backends"],
        help="step: step/grad_step cost and vmap throughput; rollout: rollout-gradient cost; shac: one SHAC "
        "iteration (exact and bcg among --estimators) vs its forward rollout; threads: env throughput with one "
        "intra-op XLA thread (the default) against XLA's pool, in fresh processes; backends: single-env step "
        "latency of both backends against Gymnasium's Pusher-v5, interleaved",
    )
    p.add_argument("--rollout-envs", type=int, default=16, help="vmapped envs of the rollout-gradient and SHAC tables")
    p.add_argument("--horizon", type=int, default=32, help="control steps of the rollout-gradient and SHAC tables")
    p.add_argument(
        "--backward",
        nargs="+",
        default=["vjp", "jacobians"],
        choices=["vjp", "jacobians"],
        help="backward passes to time: vjp (reverse mode, used in training) and jacobians (transposed "
        "full Jacobians, the previous design)",
    )
    p.set_defaults(fn=_cmd_bench)


def build_parser() -> argparse.ArgumentParser:
    """``bcg-envs``'s parser: each command's arguments, with ``fn`` the function that runs it."""
    parser = argparse.ArgumentParser(prog="bcg-envs", description=DESCRIPTION, formatter_class=_HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        _add_list,
        _add_demo,
        _add_train,
        _add_evaluate,
        _add_export,
        _add_gradcheck,
        _add_bench,
    ):
        add(sub)
    for p in sub.choices.values():
        p.formatter_class = _HelpFormatter
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    """Run the command of ``argv`` (default ``sys.argv[1:]``); bad input exits with status 2."""
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except UsageError as err:
        print(f"bcg-envs: error: {err}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


if __name__ == "__main__":
    main()
