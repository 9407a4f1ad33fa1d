"""baselines/tune.py: grids, names, scores and the table on synthetic runs; the committed
grids are equal in size and accepted by every algorithm."""

import json

import pytest

from baselines import protocol, run_csv, runners, tune
from bcg_envs.stats import format_success, wilson_interval


def test_settings_are_the_grid_product_in_key_order():
    grid = {"learning_rate": [1e-4, 3e-4, 1e-3], "ent_coef": [0.0, 0.01]}
    out = tune.settings(grid)
    assert len(out) == 6 and out[0] == {"learning_rate": 1e-4, "ent_coef": 0.0}
    assert tune.setting_name(out[1]) == "learning_rate=0.0001,ent_coef=0.01"


def test_a_dict_value_is_named_by_its_entries():
    setting = {"policy_kwargs": {"log_std_init": -1.0}, "learning_rate": 0.0003}
    assert tune.setting_name(setting) == "policy_kwargs.log_std_init=-1.0,learning_rate=0.0003"


def test_committed_grids_have_equal_effort_and_valid_keys():
    grids = json.loads(tune.GRIDS.read_text())
    sizes = {section: len(tune.settings(grid)) for section, grid in grids.items() if section != "about"}
    assert set(sizes) == {"sb3_ppo", "brax_ppo", "shac", "brax_apg"}
    assert len(set(sizes.values())) == 1, sizes  # the same number of settings for everyone
    base = protocol.load_config("BoxPush-v0")
    for algo in protocol.ALGORITHMS:
        section = protocol.config_section(algo)
        for setting in tune.settings(grids[section]):
            cfg = json.loads(json.dumps(base))
            cfg[section].update(setting)
            runners.validate_config(cfg, "BoxPush-v0", [algo])


def test_the_g1_grids_fit_the_gpu_config():
    grids = json.loads((protocol.CONFIGS / "tuning" / "G1Jump-v0.json").read_text())
    base = protocol.load_config("G1Jump-v0", protocol.CONFIGS / "G1Jump-v0.gpu.json")
    for algo in ("sb3_ppo", "shac_exact", "shac_bcg"):
        section = protocol.config_section(algo)
        settings = tune.settings(grids[section])
        assert len(settings) == 6  # equal effort
        for setting in settings:
            cfg = json.loads(json.dumps(base))
            cfg[section].update(setting)
            runners.validate_config(cfg, "G1Jump-v0", [algo])
            protocol.check_budgets(cfg, [algo], 262_144, 8)


def test_score_prefers_success_then_return():
    def rows(success, returns):
        return [dict(env_steps=i, eval_success=success, eval_return=r) for i, r in enumerate(returns)]

    assert tune.score(rows(0.5, [0, 10, 20])) == (0.5, 15.0)
    assert tune.score(rows(0.5, [0, 0, 0])) > tune.score(rows(0.25, [0, 100, 100]))


def test_table_marks_the_best_setting(tmp_path):
    grid = {"actor_lr": [0.001, 0.002]}
    plans = [("shac_bcg", s, None) for s in tune.settings(grid)]
    for (algo, setting, _), final in zip(plans, (0.2, 0.6)):
        run_csv.write_csv(
            tmp_path / algo / f"{tune.setting_name(setting)}_seed0.csv",
            [
                dict(
                    env_steps=0,
                    sim_steps=0,
                    wall_clock=0,
                    eval_return=1.0,
                    eval_success=0.0,
                    eval_length=200,
                    eval_episodes=64,
                ),
                dict(
                    env_steps=1000,
                    sim_steps=3000,
                    wall_clock=1,
                    eval_return=2.0,
                    eval_success=final,
                    eval_length=200,
                    eval_episodes=64,
                ),
            ],
        )
    table = tune.tuning_table(tmp_path, plans, 0)
    # 20 % and 60 % of 64 episodes round to 13 and 38 successes, with Wilson intervals.
    for k, best in ((13, ""), (38, "yes")):
        low, high = wilson_interval(k, 64)
        text = format_success({"success_rate": k / 64, "success_low": low, "success_high": high})
        assert f"| {text} | 1.5 | 1,000 | {best} |" in table


def test_unknown_section_is_refused(tmp_path):
    grids = tmp_path / "grids.json"
    grids.write_text(json.dumps({"shac": {"actor_lr": [0.001]}}))
    with pytest.raises(ValueError, match="no grid for 'sb3_ppo'"):
        tune.tune("BoxPush-v0", ["sb3_ppo"], 64, 0, tmp_path / "out", grids_path=grids)


def test_declared_equal_effort_grids_are_equal_valid_and_fit_their_budgets():
    path = protocol.CONFIGS / "tuning" / "equal_effort.json"
    grids = json.loads(path.read_text())
    learners = ("sb3_ppo", "brax_ppo", "shac_exact", "shac_bcg")
    assert {len(tune.settings(grids[a])) for a in learners} == {6}  # equal effort, >= 4 settings
    for env_id, budget in grids["budgets"].items():
        assert tune.declared_budget(path, env_id) == budget
        base = protocol.load_config(env_id, budget.get("config"))
        for algo in learners:
            section = protocol.config_section(algo)
            for setting in tune.settings(grids[algo]):
                cfg = json.loads(json.dumps(base))
                cfg[section].update(setting)
                runners.validate_config(cfg, env_id, [algo])
                protocol.check_budgets(cfg, [algo], budget["steps"], budget["evals"])


def test_an_explicit_grid_is_its_list_and_a_budget_other_than_declared_is_refused(tmp_path):
    assert tune.settings([{"a": 1}, {"a": 2, "b": 3}]) == [{"a": 1}, {"a": 2, "b": 3}]
    with pytest.raises(ValueError, match="list of JSON objects"):
        tune.settings([1, 2])
    path = tmp_path / "grids.json"
    path.write_text(json.dumps({"budgets": {"BoxPush-v0": {"steps": 4096, "evals": 2}}, "shac": [{}]}))
    with pytest.raises(SystemExit):
        tune.main(["--env", "BoxPush-v0", "--grids", str(path), "--steps", "8192"])


def test_finals_configs_take_each_complete_grids_winner(tmp_path):
    """The winner by final success then return goes into the learner's section of the base
    config, named in the note with the runner-up; an incomplete grid writes nothing."""
    grids = tmp_path / "grids.json"
    grids.write_text(json.dumps({"sb3_ppo": [{"learning_rate": 1e-4}, {"learning_rate": 1e-3}, {"ent_coef": 0.01}]}))
    results = tmp_path / "grid"

    def run(setting, success, ret, steps=1000):
        rows = [
            dict(
                env_steps=s,
                sim_steps=s,
                wall_clock=0,
                eval_return=r,
                eval_success=success,
                eval_length=200,
                eval_episodes=64,
            )
            for s, r in ((0, 0.0), (steps // 2, ret), (steps, ret))
        ]
        run_csv.write_csv(results / "sb3_ppo" / f"{tune.setting_name(setting)}_seed0.csv", rows)

    run({"learning_rate": 1e-4}, 0.5, 10.0)
    run({"learning_rate": 1e-3}, 0.5, 30.0)  # same success, higher return: the winner
    run({"ent_coef": 0.01}, 0.25, 99.0, steps=400)  # stopped early
    dest = tmp_path / "finals"
    with pytest.raises(ValueError, match="not complete"):
        tune.finals_configs("BoxPush-v0", ["sb3_ppo"], 1000, 0, results, dest, grids)
    assert not dest.exists()
    with pytest.raises(SystemExit) as stop:  # the command line says so in one line, exit status 2
        tune.main(
            ["--env", "BoxPush-v0", "--grids", str(grids), "--algos", "sb3_ppo", "--steps", "1000"]
            + ["--out", str(results), "--write-finals", str(dest)]
        )
    assert stop.value.code == 2 and not dest.exists()

    run({"ent_coef": 0.01}, 0.25, 99.0)
    written = tune.finals_configs("BoxPush-v0", ["sb3_ppo"], 1000, 0, results, dest, grids)
    cfg = json.loads(written["sb3_ppo"].read_text())
    base = protocol.load_config("BoxPush-v0")
    assert cfg["sb3_ppo"] == {**base["sb3_ppo"], "learning_rate": 1e-3}
    assert {k: v for k, v in cfg.items() if k not in ("sb3_ppo", "note")} == {
        k: v for k, v in base.items() if k not in ("sb3_ppo", "note")
    }
    assert "learning_rate=0.001 (final success 50.0 %, return 30.0)" in cfg["note"]
    assert "runner-up learning_rate=0.0001" in cfg["note"]
    runners.validate_config(cfg, "BoxPush-v0", ["sb3_ppo"])


def test_declared_finals_cover_every_tuned_learner_and_fit_their_budgets():
    finals = json.loads((protocol.CONFIGS / "tuning" / "finals.json").read_text())
    grids = json.loads((protocol.CONFIGS / "tuning" / "equal_effort.json").read_text())
    assert set(finals["learners"]) == {k for k in grids if k in protocol.ALGORITHMS}
    assert len(finals["seeds"]) >= 5
    budgets = list(finals["budgets"].items()) + list(finals["longer"]["budgets"].items())
    for env_id, budget in budgets:
        base = protocol.load_config(env_id)
        for algo in finals["learners"]:
            protocol.check_budgets(base, [algo], budget["steps"], budget["evals"])


def test_a_setting_another_process_trains_is_skipped_and_the_rest_are_trained(tmp_path, monkeypatch):
    """Two processes running one grid split it: a setting whose claim is held elsewhere is
    skipped, the others train; a claim is free again once its holder lets go."""
    grids = tmp_path / "grids.json"
    grids.write_text(json.dumps({"shac_exact": [{"actor_lr": 0.001}, {"actor_lr": 0.002}]}))
    out = tmp_path / "grid"
    trained = []

    def fake_runner(env_id, steps, seed, cfg, evals, recorder, checkpoints):
        trained.append(cfg["shac"]["actor_lr"])
        row = dict(env_steps=steps, sim_steps=steps, wall_clock=1.0, eval_return=1.0, eval_success=0.5)
        run_csv.write_csv(
            out / "shac_exact" / f"{checkpoints.name}.csv", [dict(row, eval_length=200, eval_episodes=64)]
        )

    monkeypatch.setitem(runners.RUNNERS, "shac_exact", fake_runner)
    lock = out / "checkpoints" / "shac_exact" / "actor_lr=0.001_seed0.lock"
    with tune.claimed(lock) as held:
        assert held
        with tune.claimed(lock) as again:
            assert not again  # the same file claimed twice: refused at once
        tune.tune("BoxPush-v0", ["shac_exact"], 256, 0, out, evals=1, grids_path=grids)
    assert trained == [0.002]
    tune.tune("BoxPush-v0", ["shac_exact"], 256, 0, out, evals=1, grids_path=grids)
    assert trained == [0.002, 0.001]  # released: trained now; the finished one is skipped
