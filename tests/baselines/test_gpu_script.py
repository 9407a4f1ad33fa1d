"""baselines/gpu_g1jump.sh and baselines/gpu_measure.sh without a GPU: bash syntax, and
their --dry-run commands (the CUDA jax of the pinned version, the GPU check, one run per
learner and seed, the same env-step budget for every learner); the GPU check's error on
a CPU."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from baselines import gpu_check, protocol

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ("baselines/gpu_g1jump.sh", "baselines/gpu_measure.sh", "baselines/gpu_common.sh")
LEARNERS = {"sb3_ppo", "brax_ppo", "shac_exact", "shac_bcg"}


def _pinned(name: str) -> str:
    """The version pyproject.toml pins for ``name`` (a ``"name==version"`` requirement)."""
    pins = re.findall(rf'"{re.escape(name)}==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert len(set(pins)) == 1, f"pyproject.toml pins {name} as {pins}"
    return pins[0]


def _bash(*args, env=None):
    return subprocess.run(
        ["bash", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _commands(stdout: str):
    """The printed commands ('+ ' lines) as argument lists (redirections kept as tokens)."""
    return [shlex.split(line[2:], comments=True) for line in stdout.splitlines() if line.startswith("+ ")]


def _option(cmd, name):
    return cmd[cmd.index(name) + 1]


def _compare_runs(commands):
    return [c for c in commands if "baselines.compare" in c]


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_parse(script):
    done = _bash("-n", script)
    assert done.returncode == 0, done.stderr


def _declared_budget():
    """The G1Jump budget that equal_effort.json declares (steps, evals, config)."""
    return json.loads((ROOT / "baselines/configs/tuning/equal_effort.json").read_text())["budgets"]["G1Jump-v0"]


def _check_equal_budgets(runs, steps, evals, config):
    cfg = protocol.load_config("G1Jump-v0", ROOT / config)
    for cmd in runs:
        assert int(_option(cmd, "--steps")) == steps and int(_option(cmd, "--evals")) == evals
        assert _option(cmd, "--config") == config
        # the learner's own rounding keeps it at exactly the budget
        assert protocol.planned_env_steps(_option(cmd, "--algos"), cfg, steps, evals) == steps


def test_dry_run_lists_setup_check_and_one_equal_run_per_learner_and_seed(tmp_path):
    done = _bash("baselines/gpu_g1jump.sh", "--dry-run", env={"OUT": str(tmp_path / "gpu")})
    assert done.returncode == 0, done.stderr
    commands = _commands(done.stdout)
    jax_pin = _pinned("jax")
    assert jax_pin == _pinned("jaxlib")
    installs = [c for c in commands if c[1:4] == ["-m", "pip", "install"]]
    assert any(f"jax[cuda12]=={jax_pin}" in c for c in installs), done.stdout
    torch = next(c for c in installs if f"torch=={_pinned('torch')}" in c)
    assert _option(torch, "--index-url") == "https://download.pytorch.org/whl/cpu"
    check = next(c for c in commands if "baselines.gpu_check" in c)
    assert _option(check, "--jax") == jax_pin
    assert commands.index(check) > max(commands.index(c) for c in installs)

    budget = _declared_budget()
    runs = _compare_runs(commands)
    assert all(commands.index(r) > commands.index(check) for r in runs)
    pairs = [(_option(c, "--algos"), _option(c, "--seeds")) for c in runs]
    assert sorted(pairs) == sorted((a, s) for a in LEARNERS for s in "012")  # each once
    _check_equal_budgets(runs, budget["steps"], budget["evals"], budget["config"])
    assert int(_option(check, "--steps")) == budget["steps"] and set(check[check.index("--algos") + 1 :]) == LEARNERS
    for cmd, (algo, seed) in zip(runs, pairs):  # one at a time, each logging to its file
        assert _option(cmd, "--out") == str(tmp_path / "gpu")
        assert cmd[-3:] == ["tee", "-a", str(tmp_path / "gpu" / "logs" / f"{algo}_seed{seed}.log")]
    assert not (tmp_path / "gpu").exists()  # a dry run writes nothing


def test_smoke_dry_run_and_cuda_13():
    done = _bash("baselines/gpu_g1jump.sh", "--dry-run", "--smoke", "--cuda", "13")
    assert done.returncode == 0, done.stderr
    commands = _commands(done.stdout)
    assert any(f"jax[cuda13]=={_pinned('jax')}" in c for c in commands)
    runs = _compare_runs(commands)
    learners, table = runs[:-1], runs[-1]  # side by side, then the table of them all
    assert {_option(c, "--algos") for c in learners} == LEARNERS and len(learners) == 4
    assert all(c[-1] == "&" for c in learners) and set(table[table.index("--algos") + 1 :][:4]) == LEARNERS
    _check_equal_budgets(learners, 8192, 2, "baselines/configs/G1Jump-v0.gpu_smoke.json")
    assert _option(table, "--steps") == "8192"


def test_grid_dry_run_tunes_each_learner_at_the_declared_budget_then_writes_the_winners(tmp_path):
    out = tmp_path / "grid"
    done = _bash("baselines/gpu_g1jump.sh", "--dry-run", "--grid", env={"OUT": str(out)})
    assert done.returncode == 0, done.stderr
    commands = _commands(done.stdout)
    check = next(c for c in commands if "baselines.gpu_check" in c)
    tunes = [c for c in commands if "baselines.tune" in c]
    assert not _compare_runs(commands) and all(commands.index(t) > commands.index(check) for t in tunes)
    grids, finals = tunes[:-1], tunes[-1]
    budget = _declared_budget()
    assert sorted(_option(c, "--algos") for c in grids) == sorted(LEARNERS)  # one learner at a time
    for cmd in tunes:
        assert _option(cmd, "--grids") == "baselines/configs/tuning/equal_effort.json"
        assert (_option(cmd, "--config"), int(_option(cmd, "--steps")), int(_option(cmd, "--evals"))) == (
            budget["config"],
            budget["steps"],
            budget["evals"],
        )
        assert _option(cmd, "--out") == str(out) and _option(cmd, "--seed") == "0"
    for cmd in grids:
        algo = _option(cmd, "--algos")
        assert cmd[-1] == str(out / "logs" / f"tune_{algo}.log")
        assert (cmd[:2] == ["env", "JAX_PLATFORMS=cpu"]) == (algo == "sb3_ppo")  # SB3 PPO stays on the CPU
    assert _option(finals, "--write-finals") == "baselines/configs/finals"  # after every grid
    assert set(finals[finals.index("--algos") + 1 : finals.index("--out")]) == LEARNERS
    assert not out.exists()


def test_finals_dry_run_trains_each_learner_at_its_winner_for_five_seeds(tmp_path):
    out = tmp_path / "finals"
    done = _bash("baselines/gpu_g1jump.sh", "--dry-run", "--finals", env={"OUT": str(out)})
    assert done.returncode == 0, done.stderr
    commands = _commands(done.stdout)
    budget = _declared_budget()
    checks = [c for c in commands if "baselines.gpu_check" in c]
    runs = _compare_runs(commands)
    winner = {a: f"baselines/configs/finals/G1Jump-v0.{a}.json" for a in LEARNERS}
    assert {(_option(c, "--algos"), _option(c, "--config")) for c in checks} == set(winner.items())
    pairs = [(_option(c, "--algos"), _option(c, "--seeds")) for c in runs]
    assert sorted(pairs) == sorted((a, s) for a in LEARNERS for s in "01234")
    for cmd in runs + checks:
        assert _option(cmd, "--config") == winner[_option(cmd, "--algos")]
        assert (int(_option(cmd, "--steps")), int(_option(cmd, "--evals"))) == (budget["steps"], budget["evals"])
    assert all(_option(c, "--out") == str(out) for c in runs)


def test_finals_without_the_grids_winners_are_refused(tmp_path):
    done = _bash(
        "baselines/gpu_g1jump.sh",
        "--finals",
        "--no-install",
        env={"PY": sys.executable, "ALGOS": "shac_exact", "OUT": str(tmp_path / "finals"), "FINALS": str(tmp_path)},
    )
    assert done.returncode == 1 and "run --grid first" in done.stderr
    assert not (tmp_path / "finals").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cuda", "11"], "--cuda takes 12 or 13"),
        (["--bogus"], "unknown option '--bogus'"),
        (["--smoke", "--grid"], "does not go with --grid"),
    ],
)
def test_bad_options_are_refused(args, message):
    done = _bash("baselines/gpu_g1jump.sh", "--dry-run", *args)
    assert done.returncode == 2 and message in done.stderr


def _lanes(stdout: str):
    """The dry run's steps before the side-by-side lanes, and each lane's steps."""
    before, lanes, lane = [], {}, None
    for line in stdout.splitlines():
        if line.startswith("# ") and line.endswith(":"):
            lane = lanes.setdefault(line[2:-1], [])
        elif line.startswith("+ "):
            (before if lane is None else lane).append(shlex.split(line[2:]))
    return before, lanes


def test_measure_dry_run_fits_nine_minutes(tmp_path):
    out = tmp_path / "measure"
    done = _bash("baselines/gpu_measure.sh", str(out), "--dry-run")
    assert done.returncode == 0, done.stderr
    commands = _commands(done.stdout)
    for c in commands:  # each step under timeout, logging to its file in OUT_DIR
        assert c[:2] == ["timeout", "-k"] and c[-2].startswith(f">{out}/") and c[-1] == "2>&1"
    before, lanes = _lanes(done.stdout)
    assert set(lanes) == {"throughput", "rollout_exact", "rollout_bcg", "shac_bcg", "brax_ppo"}
    # the steps before the lanes, the longest lane and one kill grace stay under nine minutes
    longest = max(sum(int(c[3]) for c in lane) for lane in lanes.values())
    assert sum(int(c[3]) for c in before) + longest + int(commands[-1][2]) <= 540
    check = next(c for c in before if "baselines.gpu_check" in c)
    assert _option(check, "--jax") == _pinned("jax")
    bench = [c for c in commands if "bcg_envs.cli" in c]
    assert all(_option(c, "--env") == "G1Jump-v0" for c in bench)
    assert {_option(c, "--num-envs") for c in lanes["throughput"]} == {"1024", "4096"}
    rollouts = lanes["rollout_exact"] + lanes["rollout_bcg"]
    assert [_option(c, "--estimators") for c in rollouts] == ["exact", "bcg"]
    assert all(_option(c, "--tables") == "rollout" and _option(c, "--rollout-envs") == "64" for c in rollouts)
    runs = _compare_runs(commands)
    assert {_option(c, "--algos") for c in runs} == {"shac_bcg", "brax_ppo"}
    _check_equal_budgets(
        runs, int(_option(check, "--steps")), int(_option(check, "--evals")), "baselines/configs/G1Jump-v0.gpu.json"
    )
    assert not out.exists()  # a dry run writes nothing

    serial = _bash("baselines/gpu_measure.sh", str(out), "--dry-run", "--serial")
    assert serial.returncode == 0 and _commands(serial.stdout) == commands
    assert _bash("baselines/gpu_measure.sh", "--dry-run").returncode == 2  # no OUT_DIR


def test_gpu_check_on_a_cpu_says_there_is_no_gpu():
    done = subprocess.run(
        [sys.executable, "-m", "baselines.gpu_check", "--jax", _pinned("jax")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert done.returncode == 1 and "JAX sees no GPU" in done.stderr, done.stderr
    with pytest.raises(RuntimeError, match="differ from the version pyproject.toml pins"):
        gpu_check.check_device("0.0.1")


def test_check_plan_refuses_unequal_budgets():
    # the paper-scale Brax PPO batch (98,304 env steps) overshoots a smoke budget
    with pytest.raises(ValueError, match="brax_ppo"):
        gpu_check.check_plan("G1Jump-v0", protocol.CONFIGS / "G1Jump-v0.gpu.json", 8192, 2, ["shac_bcg", "brax_ppo"])
