"""Command line: help texts and defaults, train's --config/--set/--resume parsing, list, export."""

import json

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
    assert cli.parse_set(["horizon=16", "actor_hidden=[64, 64]", "log_dir=runs/x", "gamma=0.9", "layer_norm=false",
                          "activation=elu", "bundle={\"num_samples\": 4}"]) == {
        "horizon": 16, "actor_hidden": [64, 64], "log_dir": "runs/x", "gamma": 0.9, "layer_norm": False,
        "activation": "elu", "bundle": {"num_samples": 4}}
    with pytest.raises(ValueError, match="--set expects KEY=VALUE"):
        cli.parse_set(["horizon"])


def test_train_settings_layer_config_then_set(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"num_envs": 8, "horizon": 4, "actor_hidden": [32]}))
    args = _train_args("--out", str(tmp_path / "run"), "--config", str(config), "--set", "horizon=8",
                       "--set", "bundle={\"num_samples\": 3}", "--estimator", "exact", "--seed", "2")
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
    with pytest.raises(SystemExit, match="unknown shac.train keyword"):
        cli.main(["train", "--out", str(tmp_path / "r"), "--set", "nope=1"])
    assert not (tmp_path / "r").exists()


def test_resume_takes_the_runs_own_settings(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "shac_00000004.msgpack").write_bytes(b"")
    learner = {"num_envs": 4, "horizon": 8, "actor_hidden": [16], "estimator": "exact", "seed": 3, "bundle": None,
               "log_dir": "/elsewhere", "checkpoint_dir": "/elsewhere/checkpoints", "restore_from": None}
    (run / "config.json").write_text(json.dumps({"env_id": "BoxPush-v0", "algo": "shac", "estimator": "exact",
                                                 "steps": 512, "seed": 3, "learner": learner}))
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
    (run / "config.json").write_text(json.dumps({"env_id": "BoxPush-v0", "algo": "shac", "action_size": 2,
                                                 "learner": {"actor_hidden": [8]}}))
    cli.main(["export", "--run", str(run)])
    assert f"wrote {run / 'policy.npz'}" in capsys.readouterr().out
    assert NumpyPolicy.load(run / "policy.npz")(np.zeros(5)).shape == (2,)


@pytest.mark.slow
def test_train_resume_export_end_to_end(tmp_path, capsys):
    """A tiny SHAC run from --config/--set, resumed with a larger budget, then exported."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bcg_envs.export import NumpyPolicy
    from bcg_envs.learners.runs import load_run

    run, cfg = tmp_path / "run", tmp_path / "shac.json"
    cfg.write_text(json.dumps({"num_envs": 4, "horizon": 8, "actor_hidden": [16], "critic_hidden": [16],
                               "num_evals": 0, "checkpoint_every": 1, "progress_bar": False}))
    cli.main(["train", "--out", str(run), "--estimator", "exact", "--steps", "32", "--config", str(cfg),
              "--set", "critic_iterations=2"])
    out = capsys.readouterr().out
    assert f"outputs in {run.resolve()}" in out and "params.msgpack" in out and "checkpoints/" in out
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
