"""baselines/compare.py: a bad config is refused before any run starts or any output is written."""

import json

import pytest

from baselines import compare, protocol


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c["shac"].update(actor_lr_=1e-3), r"config\['shac'\]: unknown or runner-set keys \['actor_lr_'\]"),
        (lambda c: c["brax_ppo"].update(seed=3), r"config\['brax_ppo'\]: unknown or runner-set keys \['seed'\]"),
        (lambda c: c["sb3_ppo"].pop("n_steps"), r"config\['sb3_ppo'\]: missing required keys \['n_steps'\]"),
        (lambda c: c.pop("brax_apg"), r"no 'brax_apg' section"),
        (
            lambda c: c["sb3_ppo"].update(lr_schedule="cosine"),
            r"config\['sb3_ppo'\]\['lr_schedule'\] must be 'constant' or 'linear', got 'cosine'",
        ),
        (lambda c: c.update(env="G1Jump-v0"), r"config is for env 'G1Jump-v0', not 'BoxPush-v0'"),
        (lambda c: c.update(env_kwargs=[0.002]), r"config\['env_kwargs'\] must be a JSON object"),
        (
            lambda c: c.update(env_kwargs={"backend": "mjx"}),
            r"config\['env_kwargs'\]: \['backend'\] are set by the runners",
        ),
        (
            lambda c: c.update(env_kwargs={"physics_dt": 0.003}),
            r"config\['env_kwargs'\] rejected by BoxPush-v0: .*multiple of the physics timestep",
        ),
        (
            lambda c: c.update(env_kwargs={"stiffness": 0.002}),
            r"config\['env_kwargs'\] rejected by BoxPush-v0: .*accepted kwargs",
        ),
    ],
)
def test_bad_config_is_rejected_before_any_run(tmp_path, edit, message):
    cfg = protocol.load_config("BoxPush-v0")
    edit(cfg)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=message):
        compare.compare("BoxPush-v0", list(protocol.ALGORITHMS), [0], 64, tmp_path / "out", config=path)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("module", ["compare", "tune", "final_scores"])
def test_unregistered_env_is_refused_by_the_parser(module, capsys):
    import importlib

    main = importlib.import_module(f"baselines.{module}").main
    with pytest.raises(SystemExit):
        main(["--env", "BoxPush-v9"])
    err = capsys.readouterr().err
    assert "argument --env: invalid choice: 'BoxPush-v9'" in err and "'BoxPush-v0'" in err
