"""Command line: help texts and defaults, train's --config/--set/--resume parsing, one-line
errors, the train summary, list, export (.npz and ONNX)."""

import json
from pathlib import Path

import pytest

from bcg_envs import cli


def _subparsers():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return parser, sub.choices


def test_every_option_has_help_and_shows_its_default():
    _, subs = _subparsers()
    assert {"list", "demo", "train", "evaluate", "export", "gradcheck", "bench"} <= set(subs)
    for name, p in subs.items():
        assert p.formatter_class is cli._HelpFormatter
        fmt = p.formatter_class(name)
        for action in p._actions:
            if not action.option_strings or action.dest == "help":
                continue
            option = f"{name} {action.option_strings[0]}"
            assert action.help, f"{option} has no help text"
            if action.default is not None:
                assert "%(default)s" in fmt._get_help_string(action), f"{option} hides its default"
    train = subs["train"].format_help()
    assert "(default: bcg)" in train and "--config FILE" in train and "KEY=VALUE" in train and "--resume DIR" in train
    assert "(default: 200000 for a new run" in train and "default: None" not in train


def _train_args(*argv):
    return cli.build_parser().parse_args(["train", *argv])


def test_set_values_parse_as_json_then_string():
    assert cli.parse_set(
        [
            "horizon=16",
            "actor_hidden=[64, 64]",
            "log_dir=runs/x",
            "gamma=0.9",
            "layer_norm=false",
            "activation=elu",
            'bundle={"num_samples": 4}',
        ]
    ) == {
        "horizon": 16,
        "actor_hidden": [64, 64],
        "log_dir": "runs/x",
        "gamma": 0.9,
        "layer_norm": False,
        "activation": "elu",
        "bundle": {"num_samples": 4},
    }
    with pytest.raises(ValueError, match="--set expects KEY=VALUE"):
        cli.parse_set(["horizon"])


def test_train_settings_layer_config_then_set(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"num_envs": 8, "horizon": 4, "actor_hidden": [32]}))
    args = _train_args(
        "--out",
        str(tmp_path / "run"),
        "--config",
        str(config),
        "--set",
        "horizon=8",
        "--set",
        'bundle={"num_samples": 3}',
        "--estimator",
        "exact",
        "--seed",
        "2",
    )
    s = cli.train_settings(args)
    assert s["num_envs"] == 8 and s["horizon"] == 8 and s["actor_hidden"] == [32]
    assert s["estimator"] == "exact" and s["seed"] == 2 and s["steps"] == cli.DEFAULT_TRAIN_STEPS
    assert s["bundle"].num_samples == 3 and s["out_dir"] == str(tmp_path / "run")


def test_train_settings_errors(tmp_path):
    with pytest.raises(ValueError, match=r"unknown shac.train keyword 'horizn'; valid keys: num_envs, horizon, "):
        cli.train_settings(_train_args("--out", "x", "--set", "horizn=3"))
    with pytest.raises(ValueError, match=r"'estimator' is set by --estimator"):
        cli.train_settings(_train_args("--out", "x", "--set", "estimator=exact"))
    with pytest.raises(ValueError, match="--out is required"):
        cli.train_settings(_train_args())
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        cli.train_settings(_train_args("--out", "x", "--config", str(bad)))
    with pytest.raises(ValueError, match="not a run folder"):
        cli.train_settings(_train_args("--resume", str(tmp_path)))


def test_resume_takes_the_runs_own_settings(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "shac_00000004.msgpack").write_bytes(b"")
    learner = {
        "num_envs": 4,
        "horizon": 8,
        "actor_hidden": [16],
        "estimator": "exact",
        "seed": 3,
        "bundle": None,
        "log_dir": "/elsewhere",
        "checkpoint_dir": "/elsewhere/checkpoints",
        "restore_from": None,
    }
    (run / "config.json").write_text(
        json.dumps(
            {"env_id": "BoxPush-v0", "algo": "shac", "estimator": "exact", "steps": 512, "seed": 3, "learner": learner}
        )
    )
    s = cli.train_settings(_train_args("--resume", str(run), "--set", "checkpoint_every=2"))
    assert (s["env_id"], s["estimator"], s["seed"], s["steps"]) == ("BoxPush-v0", "exact", 3, 512)
    assert s["out_dir"] == str(run) and s["restore_from"] == str(run / "checkpoints")
    assert s["num_envs"] == 4 and s["actor_hidden"] == [16] and s["checkpoint_every"] == 2
    assert "log_dir" not in s and "checkpoint_dir" not in s and "bundle" not in s
    assert cli.train_settings(_train_args("--resume", str(run), "--steps", "1024"))["steps"] == 1024
    with pytest.raises(ValueError, match="continues the run in place"):
        cli.train_settings(_train_args("--resume", str(run), "--out", str(tmp_path / "other")))


def test_list_ids_only(capsys):
    cli.main(["list", "--ids-only"])
    assert capsys.readouterr().out.split() == __import__("bcg_envs").list_envs()


def test_env_table_boxpush():
    table = cli.env_table(["bcg_envs/BoxPush-v0"]).splitlines()
    assert table[0].split() == ["id", "obs", "act", "control", "Hz", "episode", "steps"]
    row = table[2].split()
    assert row[0] == "bcg_envs/BoxPush-v0" and int(row[2]) == 2 and float(row[3]) > 0 and int(row[1]) > 0


def test_export_command(tmp_path, capsys):
    import flax.serialization
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bcg_envs.export import NumpyPolicy
    from bcg_envs.learners import networks

    run = tmp_path / "run"
    run.mkdir()
    actor = networks.Actor(2, (8,)).init(jax.random.PRNGKey(0), jnp.zeros((5,)))
    params = jax.tree.map(np.asarray, {"normalizer": networks.normalizer_init(5), "actor": actor})
    (run / "params.msgpack").write_bytes(flax.serialization.msgpack_serialize(params))
    (run / "config.json").write_text(
        json.dumps({"env_id": "BoxPush-v0", "algo": "shac", "action_size": 2, "learner": {"actor_hidden": [8]}})
    )
    cli.main(["export", "--run", str(run)])
    assert f"wrote {run / 'policy.npz'}" in capsys.readouterr().out
    assert NumpyPolicy.load(run / "policy.npz")(np.zeros(5)).shape == (2,)
    onnxruntime = pytest.importorskip("onnxruntime")  # the onnx extra (scripts/setup.sh installs it)

    cli.main(["export", "--run", str(run), "--format", "onnx"])
    out = capsys.readouterr().out
    assert f"wrote {run / 'policy.onnx'}" in out and "onnxruntime.InferenceSession" in out
    obs = np.random.default_rng(0).normal(size=(16, 5)).astype(np.float32)
    (got,) = onnxruntime.InferenceSession(str(run / "policy.onnx")).run(["action"], {"obs": obs})
    np.testing.assert_allclose(got, NumpyPolicy.load(run / "policy.npz")(obs), atol=1e-5, rtol=0)


def test_export_converts_a_shipped_policy_to_onnx(tmp_path, capsys):
    """``--policy`` turns an exported .npz (here the shipped SB3 PPO policy) into ONNX."""
    import numpy as np

    from bcg_envs.envs.resources import trained_policy_path
    from bcg_envs.export import NumpyPolicy

    ort = pytest.importorskip("onnxruntime")
    shipped = trained_policy_path("BoxPush-v0", "sb3_ppo")
    cli.main(["export", "--policy", str(shipped), "--out", str(tmp_path / "boxpush.onnx")])
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'boxpush.onnx'}" in out and "env BoxPush-v0" in out and "output clip" in out
    obs = np.random.default_rng(0).normal(scale=100.0, size=(64, 17)).astype(np.float32)  # past VecNormalize's clip
    (got,) = ort.InferenceSession(str(tmp_path / "boxpush.onnx")).run(["action"], {"obs": obs})
    np.testing.assert_allclose(got, NumpyPolicy.load(shipped)(obs), atol=1e-5, rtol=0)


def test_export_input_errors_are_one_line(tmp_path, capsys):
    from bcg_envs.envs.resources import trained_policy_path

    shipped = str(trained_policy_path("BoxPush-v0"))
    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "params.msgpack"):
        (run / name).write_text("{}")
    assert "exactly one of --run DIR (a SHAC run folder) and --policy FILE.npz" in _error_line(
        capsys, ["export", "--run", str(run), "--policy", shipped]
    )
    assert "got neither" in _error_line(capsys, ["export", "--format", "onnx"])
    assert "is an .npz already; --policy converts one to --format onnx" in _error_line(
        capsys, ["export", "--policy", shipped, "--format", "npz"]
    )
    missing = str(tmp_path / "missing.npz")
    assert f"--policy {missing}: no such file" in _error_line(capsys, ["export", "--policy", missing])
    (tmp_path / "bad.npz").write_text("not a policy")
    assert "not a policy file of bcg_envs.export" in _error_line(
        capsys, ["export", "--policy", str(tmp_path / "bad.npz"), "--out", str(tmp_path / "bad.onnx")]
    )
    assert not (tmp_path / "bad.onnx").exists()
    with pytest.raises(SystemExit) as exc:
        cli.main(["export", "--policy", shipped, "--format", "pt"])
    assert exc.value.code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "argument --format: invalid choice: 'pt'" in err and "npz" in err and "onnx" in err


def test_export_without_onnx_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    import sys

    from bcg_envs.envs.resources import trained_policy_path

    monkeypatch.setitem(sys.modules, "onnx", None)  # what a missing package looks like to import
    err = _error_line(
        capsys, ["export", "--policy", str(trained_policy_path("BoxPush-v0")), "--out", str(tmp_path / "p.onnx")]
    )
    assert 'pip install "/path/to/bcg_envs[onnx]"' in err and not (tmp_path / "p.onnx").exists()


@pytest.mark.long
def test_train_resume_export_end_to_end(tmp_path, capsys):
    """A tiny SHAC run from --config/--set, resumed with a larger budget, then exported."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bcg_envs.export import NumpyPolicy
    from bcg_envs.learners.runs import load_run

    run, cfg = tmp_path / "run", tmp_path / "shac.json"
    cfg.write_text(
        json.dumps(
            {
                "num_envs": 4,
                "horizon": 8,
                "actor_hidden": [16],
                "critic_hidden": [16],
                "num_evals": 0,
                "checkpoint_every": 1,
                "progress_bar": False,
            }
        )
    )
    cli.main(
        [
            "train",
            "--out",
            str(run),
            "--estimator",
            "exact",
            "--steps",
            "32",
            "--config",
            str(cfg),
            "--set",
            "critic_iterations=2",
        ]
    )
    out = capsys.readouterr().out
    assert f"run folder: {run.resolve()}" in out and "params.msgpack" in out and "checkpoints/" in out
    assert "final evaluation" not in out and "no evaluation (num_evals=0)" in out
    cli.main(["train", "--resume", str(run), "--steps", "64"])
    capsys.readouterr()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["shac_00000001.msgpack", "shac_00000002.msgpack"]
    config = json.loads((run / "config.json").read_text())
    assert config["steps"] == 64 and config["learner"]["critic_iterations"] == 2 and config["estimator"] == "exact"
    assert len((run / "progress.csv").read_text().strip().splitlines()) == 3  # header + one row per iteration

    cli.main(["export", "--run", str(run), "--out", str(tmp_path / "p.npz")])
    _, params, make_policy = load_run(run)
    obs = np.random.default_rng(0).normal(size=(1000, config["observation_size"])).astype(np.float32)
    expected = np.asarray(jax.jit(make_policy(params, deterministic=True))(jnp.asarray(obs), jax.random.PRNGKey(0))[0])
    np.testing.assert_allclose(NumpyPolicy.load(tmp_path / "p.npz")(obs), expected, atol=1e-5, rtol=0)


def test_help_texts_have_no_rst_literals():
    parser, subs = _subparsers()
    for text in [parser.format_help(), *(p.format_help() for p in subs.values())]:
        assert "``" not in text
    assert cli.plain_text("run ``bcg-envs list`` or\n``x``") == "run bcg-envs list or\nx"


def _error_line(capsys, argv):
    """Run ``bcg-envs argv``; return its stderr after checking the exit status 2 and one line."""
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == cli.EXIT_USAGE
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bcg-envs: error: "), captured.err
    return lines[0]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["train", "--steps", "0"], "--steps must be a positive integer (env steps), got 0"),
        (["train", "--env", "NoSuchEnv-v0"], "--env: unknown env id 'NoSuchEnv-v0'"),
        (["train", "--set", "nope=1"], "unknown shac.train keyword 'nope'"),
        (["train", "--set", "num_envs=0", "--steps", "8"], "num_envs, horizon and num_timesteps must be >= 1"),
    ],
)
def test_train_input_errors_are_one_line_and_leave_no_run_folder(tmp_path, capsys, argv, match):
    run = tmp_path / "run"
    assert match in _error_line(capsys, [*argv, "--out", str(run)])
    assert not run.exists()


def test_missing_run_folders_are_one_line_errors(tmp_path, capsys):
    missing = str(tmp_path / "missing")
    for argv in (["evaluate", "--run", missing], ["export", "--run", missing], ["train", "--resume", missing]):
        assert f"{missing}: no such folder" in _error_line(capsys, argv)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    assert "params.msgpack missing" in _error_line(capsys, ["evaluate", "--run", str(tmp_path / "half")])
    assert "unknown env id" in _error_line(capsys, ["gradcheck", "--env", "Nope-v0"])
    assert "--boxpush-episodes must be a positive integer" in _error_line(
        capsys, ["demo", "--boxpush-episodes", "0", "--out", str(tmp_path / "demo")]
    )
    assert not (tmp_path / "demo").exists()


def test_train_prints_compiling_first_and_ends_with_a_summary(tmp_path, capsys, monkeypatch):
    """``train`` with a stand-in for ``train_run``: the "compiling" line comes before the
    learner starts, and a few summary lines replace the JSON dump (kept in metrics.json)."""
    from bcg_envs.learners import runs

    run = tmp_path / "run"
    seen = {}

    def fake_train_run(env_id, *, out_dir, **settings):
        seen["before"] = capsys.readouterr().out
        out = Path(out_dir)
        (out / "checkpoints").mkdir(parents=True)
        (out / "config.json").write_text(json.dumps({"learner": {"num_eval_envs": 16}}))
        (out / "events.out.tfevents.123.host").write_text("")
        metrics = {"num_steps": 2048, "eval/episode_reward": 412.345, "eval/success": 0.3125, "actor_loss": 1.0}
        (out / "metrics.json").write_text(json.dumps(metrics))
        return metrics

    monkeypatch.setattr(runs, "train_run", fake_train_run)
    cli.main(["train", "--out", str(run), "--steps", "2048", "--estimator", "exact"])
    assert "compiling" in seen["before"]
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 4 and "{" not in "".join(out)
    assert out[0].startswith("done in ") and "SHAC (exact gradients) on BoxPush-v0, 2,048 env steps, seed 0" in out[0]
    assert out[1] == "final evaluation (16 episodes, deterministic policy): return 412.3, success 31 %"
    assert out[2] == (f"run folder: {run.resolve()} (checkpoints/, config.json, metrics.json, TensorBoard events)")
    assert out[3].startswith(f"next: bcg-envs evaluate --run {run}")


def test_filelock_is_a_dependency():
    """JAX's persistent compile cache, which bcg_envs turns on, needs filelock."""
    tomllib = pytest.importorskip("tomllib")
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    assert any(d.split(">")[0].split("=")[0].strip() == "filelock" for d in deps)
    from jax._src import lru_cache

    assert lru_cache.filelock is not None


def test_train_run_checks_its_inputs_before_creating_the_run_folder(tmp_path):
    from bcg_envs.learners.runs import train_run

    run = tmp_path / "run"
    with pytest.raises(ValueError, match="unknown env id 'Nope-v0'"):
        train_run("Nope-v0", steps=8, out_dir=run)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        train_run("BoxPush-v0", steps=0, out_dir=run)
    with pytest.raises(TypeError, match=r"unknown learner keyword\(s\) \['horizn'\]"):
        train_run("BoxPush-v0", steps=8, out_dir=run, horizn=4)
    assert not run.exists()


def test_threads_table_reports_both_settings_and_their_ratio():
    from bcg_envs import bench

    text = bench.report_cpu_threads(
        {"1": {"step, 64 envs": [200.0, 100.0]}, "auto": {"step, 64 envs": [100.0, 50.0]}, "auto hung": {}},
        "BoxPush-v0",
    )
    assert "| step, 64 envs | 150 | 75 | 2.00 |" in text
    assert "auto hung" in text


def test_bench_report_starts_with_the_device(capsys, monkeypatch):
    import jax

    from bcg_envs import bench

    monkeypatch.setattr(bench, "run", lambda *args, **kwargs: {})
    monkeypatch.setattr(bench, "report", lambda results: "| step table |")
    cli.main(["bench", "--env", "BoxPush-v0", "--tables", "step"])
    lines = capsys.readouterr().out.splitlines()
    device = jax.devices()[0]
    assert lines[0].startswith("bcg-envs bench, BoxPush-v0, device: ")
    assert f"{device.platform} ({device.device_kind})" in lines[0] and f"jax {jax.__version__}" in lines[0]
    assert lines[1] == "| step table |"
