"""baselines/protocol.py: equal budgets, the evaluation's env arguments and simulator, the rows the Recorder writes."""

import csv
import math
import os

import pytest

from baselines import cpu_clock, protocol, run_csv, runners


@pytest.fixture
def fixed_evaluation(monkeypatch):
    """``protocol.evaluate`` replaced by a constant score (no env is built)."""
    monkeypatch.setattr(
        protocol,
        "evaluate",
        lambda env_id, act, env_kwargs=None, backend="": dict(
            eval_return=1.0, eval_success=0.5, eval_length=200.0, eval_episodes=64
        ),
    )


def test_planned_budgets_are_equal_for_the_committed_configs():
    """Every algorithm trains for the budget within 10 % at the budgets the repository runs:
    BoxPush 200k (5 evaluations), the GPU script's 1,966,080 (10) -- where Brax PPO's
    paper-size batch once made it train 3.9x longer than the rest."""
    gpu = protocol.load_config("G1Jump-v0", protocol.CONFIGS / "G1Jump-v0.gpu.json")
    planned = protocol.check_budgets(gpu, list(protocol.ALGORITHMS), 1_966_080, 10)
    assert set(planned.values()) == {1_966_080}
    protocol.check_budgets(protocol.load_config("BoxPush-v0"), list(protocol.ALGORITHMS), 200_000, 5)
    gpu["brax_ppo"].update(batch_size=1024, num_minibatches=32)  # the old 786,432-step batch
    assert protocol.planned_env_steps("brax_ppo", gpu, 2_000_000, 10) == 7_864_320
    with pytest.raises(ValueError, match="unequal budgets.*brax_ppo"):
        protocol.check_budgets(gpu, ["shac_bcg", "brax_ppo"], 2_000_000, 10)


def test_env_kwargs_reach_training_and_evaluation(monkeypatch):
    """A config's ``env_kwargs`` build the learners' JAX env and the protocol's evaluation
    env alike (same physics for every algorithm); the penalty model is scored on MJX."""
    cfg = protocol.load_config("BoxPush-v0", protocol.CONFIGS / "BoxPush-v0.stiff_2ms.json")
    env = runners.jax_env_for("BoxPush-v0", "exact", cfg)
    assert env.physics.mj_model.opt.timestep == pytest.approx(0.001)
    assert env.contact_stiffness == pytest.approx(0.002)
    seen = {}

    def fake_run_episodes(env_id, act, **kwargs):
        seen.update(kwargs)
        return dict(mean_return=1.0, success_rate=0.5, mean_length=3.0)

    import bcg_envs.envs.evaluation as evaluation

    monkeypatch.setattr(evaluation, "run_episodes", fake_run_episodes)
    protocol.Recorder("BoxPush-v0", None, protocol.env_kwargs_of(cfg)).record(0, lambda obs: obs, 0.0)
    assert seen["env_kwargs"] == cfg["env_kwargs"] and seen["backend"] == "mujoco"
    assert protocol.protocol_backend({"contact_model": "penalty", "kappa": 300.0}) == "mjx"


def test_a_bundle_object_in_env_kwargs_configures_the_bcg_learner():
    """``env_kwargs.bundle`` is a ``BundleConfig`` (so ``shac_bcg`` can run the paper's
    single-contact trigger); a field it does not have or a bad value is named."""
    from bcg_envs import BundleConfig

    cfg = {"env_kwargs": {"bundle": {"trigger": "point", "state_sigma": [0.02, 0.04]}}, "shac": {}}
    kwargs = protocol.env_kwargs_of(cfg)
    assert kwargs["bundle"] == BundleConfig(trigger="point", state_sigma=(0.02, 0.04))
    env = runners.jax_env_for("BoxPush-v0", "bcg", cfg)
    assert env.bundle.trigger == "point" and env.bundle.force_threshold == env.default_force_threshold
    for bad, message in (
        ({"trigger_": "point"}, "unexpected keyword argument 'trigger_'"),
        ({"trigger": "x"}, "one of"),
    ):
        with pytest.raises(
            ValueError, match=f"config\\['env_kwargs'\\]\\['bundle'\\] is not a BundleConfig: .*{message}"
        ):
            runners.validate_config({"env_kwargs": {"bundle": bad}, "shac": {}}, "BoxPush-v0", [])


def test_a_resumed_run_keeps_its_rows_and_writes_counts_as_integers(tmp_path, fixed_evaluation):
    """A run stopped after its row at 200 env steps and resumed from its checkpoint at 100:
    the rows up to 100 stay, the wall-clock continues from there, and the rewritten CSV
    still writes env steps and episodes as integers."""
    path = tmp_path / "shac_exact_seed0.csv"
    first = protocol.Recorder("BoxPush-v0", path)
    for steps in (0, 100, 200):
        first.record(steps, lambda obs: obs, 3.0 * steps)
    kept_wall = run_csv.read_rows(path)[1]["wall_clock"]
    resumed = protocol.Recorder("BoxPush-v0", path)
    resumed.resume_from(100)
    resumed.record(200, lambda obs: obs, 600.0)
    rows = run_csv.read_rows(path)
    assert [r["env_steps"] for r in rows] == [0, 100, 200]
    assert rows[2]["wall_clock"] >= kept_wall
    assert [r["resumes"] for r in rows] == [0, 0, 1]  # carried on every row from the resume on
    with path.open() as f:
        parsed = list(csv.DictReader(f))
    assert [r["env_steps"] for r in parsed] == ["0", "100", "200"]
    assert {r["eval_episodes"] for r in parsed} == {"64"}
    again = protocol.Recorder("BoxPush-v0", path)
    again.resume_from(200)
    again.record(300, lambda obs: obs, 900.0)
    assert run_csv.read_rows(path)[-1]["resumes"] == 2


def test_resuming_a_csv_from_before_the_count_of_resumes(tmp_path, fixed_evaluation):
    """A CSV without ``resumes`` reads it as unknown (nan), and once resumed by newer code
    counts that resume: its earlier ones are unknown, counted as none."""
    path = tmp_path / "shac_exact_seed0.csv"
    fields = [f for f in run_csv.CSV_FIELDS if f != "resumes"]
    path.write_text(",".join(fields) + "\n" + ",".join(["0"] + ["1.0"] * (len(fields) - 1)) + "\n")
    assert math.isnan(run_csv.read_rows(path)[0]["resumes"])
    resumed = protocol.Recorder("BoxPush-v0", path)
    resumed.resume_from(100)
    resumed.record(100, lambda obs: obs, 300.0)
    rows = run_csv.read_rows(path)
    assert math.isnan(rows[0]["resumes"]) and rows[1]["resumes"] == 1


def _fake_clocks(monkeypatch, ticks):
    """Replace the three clocks ``CpuMeter`` reads by a list of (wall, own CPU, machine CPU)
    readings, consumed in order."""
    readings = iter(ticks)
    current = {}

    def advance():
        current["now"] = next(readings)

    monkeypatch.setattr(cpu_clock.time, "perf_counter", lambda: (advance(), current["now"][0])[1])
    monkeypatch.setattr(cpu_clock.time, "process_time", lambda: current["now"][1])
    monkeypatch.setattr(cpu_clock, "busy_cpu_seconds", lambda cpus: current["now"][2])


def test_cpu_columns_leave_evaluation_out_and_continue_on_resume(tmp_path, monkeypatch, fixed_evaluation):
    """Training 10 s of wall-clock, 8 s of own CPU, 13 s of CPU on the run's cores (so 5 s
    by others); evaluation (100 s, burning CPU) is left out; a resumed run adds to the kept
    row's clocks."""
    path = tmp_path / "shac_exact_seed0.csv"
    _fake_clocks(monkeypatch, [(0, 0, 0), (10, 8, 13), (110, 108, 313), (120, 116, 326), (130, 130, 400)])
    rec = protocol.Recorder("BoxPush-v0", path)  # reading 1: start
    rec.record(0, lambda obs: obs, 0.0)  # readings 2, 3: before and after the evaluation
    rec.record(100, lambda obs: obs, 300.0)  # readings 4, 5
    rows = run_csv.read_rows(path)
    assert [(r["wall_clock"], r["cpu_time"], r["others_cpu_time"]) for r in rows] == [(10, 8, 5), (20, 16, 10)]
    assert rows[0]["cpus"] == len(os.sched_getaffinity(0))
    _fake_clocks(monkeypatch, [(0, 0, 0), (4, 4, 4), (9, 9, 9)])
    resumed = protocol.Recorder("BoxPush-v0", path)
    resumed.resume_from(100)
    resumed.record(200, lambda obs: obs, 600.0)
    last = run_csv.read_rows(path)[-1]
    assert (last["wall_clock"], last["cpu_time"], last["others_cpu_time"]) == (24, 20, 10)


def test_the_training_simulator_of_each_learner():
    assert protocol.training_backend("sb3_ppo", {}) == "mujoco"
    assert {protocol.training_backend(a, {}) for a in ("brax_ppo", "shac_exact", "shac_bcg")} == {"mjx"}
    moreau = {"contact_model": "moreau", "kappa": 300.0}
    assert protocol.training_backend("sb3_ppo", moreau) == protocol.protocol_backend(moreau) == "mjx"


def test_the_last_row_also_scores_the_policy_in_its_own_simulator(tmp_path, monkeypatch):
    """A learner trained in MJX and scored in MuJoCo C: only the row at the budget carries
    the MJX score, from the same episodes; a learner scored where it trains gets none."""
    calls = []

    def evaluate(env_id, act, env_kwargs=None, backend=""):
        calls.append(backend)
        score = 0.75 if backend == "mjx" else 0.25
        return dict(eval_return=100 * score, eval_success=score, eval_length=200.0, eval_episodes=64)

    monkeypatch.setattr(protocol, "evaluate", evaluate)
    path = tmp_path / "shac_exact_seed0.csv"
    rec = protocol.Recorder("BoxPush-v0", path, budget=200, train_backend="mjx")
    for steps in (0, 100, 200):
        rec.record(steps, lambda obs: obs, 0.0)
    rows = run_csv.read_rows(path)
    assert calls == ["", "", "", "mjx"]
    assert all(math.isnan(r["train_sim_success"]) for r in rows[:2])
    assert (rows[2]["eval_success"], rows[2]["train_sim_success"], rows[2]["train_sim_return"]) == (0.25, 0.75, 75.0)
    calls.clear()
    same = protocol.Recorder("BoxPush-v0", tmp_path / "sb3_ppo_seed0.csv", budget=200, train_backend="mujoco")
    same.record(200, lambda obs: obs, 0.0)
    assert calls == [""] and math.isnan(run_csv.read_rows(tmp_path / "sb3_ppo_seed0.csv")[0]["train_sim_success"])


@pytest.mark.parametrize("kept", [(), (100,)], ids=["csv missing", "csv without its start"])
def test_resuming_without_the_runs_first_rows_is_refused(tmp_path, fixed_evaluation, kept):
    """A checkpoint at 200 env steps beside a CSV that lost its first rows (deleted, or
    rewritten by hand): resuming would record a run that starts mid-way, so it is refused
    with the way out."""
    path = tmp_path / "sb3_ppo_seed1.csv"
    first = protocol.Recorder("BoxPush-v0", path)
    for steps in kept:
        first.record(steps, lambda obs: obs, 3.0 * steps)
    resumed = protocol.Recorder("BoxPush-v0", path)
    with pytest.raises(
        ValueError, match=r"checkpoint at 200 env steps exists, but the CSV .*delete the run's checkpoint"
    ):
        resumed.resume_from(200)
