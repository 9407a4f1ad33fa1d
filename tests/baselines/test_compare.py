"""Table and plot writer on a synthetic CSV; every algorithm end to end on a tiny budget."""

import csv
import json
import math
import os

import numpy as np
import pytest

from baselines import compare, cpu_clock, protocol, run_csv, runners, summary


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


def _write(path, rows):
    run_csv.write_csv(path, [dict(env_steps=s, wall_clock=w, eval_return=r) for s, w, r in rows])


def test_summary_table_from_synthetic_csv(tmp_path):
    _write(tmp_path / "sb3_ppo_seed0.csv", [(0, 0, -10), (1000, 5, 0), (2000, 10, 10)])
    _write(tmp_path / "sb3_ppo_seed1.csv", [(0, 0, -10), (1000, 6, 2), (2000, 12, 10)])
    _write(tmp_path / "shac_bcg_seed0.csv", [(0, 0, -10), (500, 20, 9), (1000, 40, 12)])
    runs = run_csv.read_runs(tmp_path)
    table = summary.summary_table(runs)
    lines = table.splitlines()
    assert lines[0] == (
        "| algorithm | seeds | final return | final success [95% CI] | episode length "
        "| env steps to 90% of PPO | env steps to 50% of best success "
        "| env steps to 90% of best success | simulated steps | wall-clock (s) "
        "| wall-clock to 50% / 90% of best success (s) | CPU time (s) |"
    )
    # target = -10 + 0.9 * (10 - -10) = 8: PPO reaches it at 2000 steps, SHAC at 500.
    # These CSVs predate the success, simulated-steps and CPU columns: '—', and their
    # wall-clock is not known to be a timing.
    assert (
        "| sb3_ppo | 2 | 10.00 ± 0.00 | — | — | 2,000 (2/2) | — (no success) | — (no success) | — | 11 (shared) "
        "| — / — | — |"
    ) in lines
    assert (
        "| shac_bcg | 1 | 12.00 ± 0.00 | — | — | 500 (1/1) | — (no success) | — (no success) | — | 40 (shared) "
        "| — / — | — |"
    ) in lines
    summary.plot_curves(runs, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_summary_table_reports_success_with_a_wilson_interval(tmp_path):
    from bcg_envs.stats import wilson_interval

    for seed, final in enumerate((0.5, 0.75)):
        run_csv.write_csv(
            tmp_path / f"sb3_ppo_seed{seed}.csv",
            [
                dict(env_steps=0, wall_clock=0, eval_return=-5, eval_success=0.0, eval_length=200, eval_episodes=16),
                dict(env_steps=100, wall_clock=1, eval_return=5, eval_success=final, eval_length=150, eval_episodes=16),
            ],
        )
    runs = run_csv.read_runs(tmp_path)
    table = summary.summary_table(runs)
    low, high = wilson_interval(20, 32)  # 8 + 12 of 2 x 16 episodes
    assert f"| 62.5 % [{100 * low:.1f}, {100 * high:.1f}] | 150 |" in table
    summary.plot_curves(runs, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_summary_reads_only_runs_that_reached_their_budget(tmp_path, capsys):
    """A run in progress (seed 1 at half the budget) stays out of the summary; an algorithm
    whose planned budget is rounded down (2,000 of 2,048) counts as complete at its plan."""
    _write(tmp_path / "sb3_ppo_seed0.csv", [(0, 0, -10), (2048, 5, 10)])
    _write(tmp_path / "sb3_ppo_seed1.csv", [(0, 0, -10), (1024, 5, -3)])
    _write(tmp_path / "brax_apg_seed0.csv", [(0, 0, -10), (2000, 5, 4)])
    _write(tmp_path / "shac_exact_seed0.csv", [(0, 0, -10), (2048, 5, 12)])
    runs = run_csv.read_runs(tmp_path, {"sb3_ppo": 2048, "brax_apg": 2000})
    assert sorted(runs) == ["brax_apg", "sb3_ppo"] and len(runs["sb3_ppo"]) == 1
    printed = capsys.readouterr().out
    assert "sb3_ppo_seed1.csv: left out of the summary (reaches 1,024 env steps of 2,048)" in printed
    assert "shac_exact_seed0.csv: left out of the summary (reaches 2,048 env steps of no known budget)" in printed
    assert "| sb3_ppo | 1 | 10.00 ± 0.00 |" in summary.summary_table(runs)
    assert len(run_csv.read_runs(tmp_path)["sb3_ppo"]) == 2  # without budgets: every run


def test_the_gap_in_env_steps_to_the_best_success(tmp_path):
    """Best success 0.8 (SHAC's seed mean at 2,000 steps): 50 % of it is 0.4, 90 % is 0.72.
    PPO's seeds reach 0.4 at 20k and 40k (median 30k) and one reaches 0.72 at 40k; SHAC's
    both reach 0.4 at 1k and 0.72 at 2k."""

    def rows(points, sims_per_step):
        return [
            dict(
                env_steps=s,
                sim_steps=sims_per_step * s,
                wall_clock=s / 100,
                eval_return=0.0,
                eval_success=p,
                eval_length=200,
                eval_episodes=64,
            )
            for s, p in points
        ]

    run_csv.write_csv(tmp_path / "sb3_ppo_seed0.csv", rows([(0, 0), (20_000, 0.5), (40_000, 0.75)], 1))
    run_csv.write_csv(tmp_path / "sb3_ppo_seed1.csv", rows([(0, 0), (20_000, 0.1), (40_000, 0.45)], 1))
    run_csv.write_csv(tmp_path / "shac_bcg_seed0.csv", rows([(0, 0), (1_000, 0.5), (2_000, 0.8)], 3.5))
    run_csv.write_csv(tmp_path / "shac_bcg_seed1.csv", rows([(0, 0), (1_000, 0.4), (2_000, 0.8)], 3.5))
    runs = run_csv.read_runs(tmp_path)
    assert summary.best_success(runs) == pytest.approx(0.8)
    table = summary.summary_table(runs)
    assert "| 30,000 (2/2) | 40,000 (1/2) | 40,000 | 400 (shared) | — / — | — |" in table
    assert "| 1,000 (2/2) | 2,000 (2/2) | 7,000 | 20 (shared) | — / — | — |" in table
    assert "Gap, sb3_ppo / shac_bcg env steps to the best success's 50 %: 30.0x; 90 %: 20.0x." in table
    run_csv.write_csv(tmp_path / "brax_ppo_seed0.csv", rows([(0, 0), (10_000, 0.4), (20_000, 0.2)], 1))
    table = summary.summary_table(run_csv.read_runs(tmp_path))
    assert "Gap, sb3_ppo / shac_bcg env steps to the best success's 50 %: 30.0x; 90 %: 20.0x." in table
    assert (
        "Gap, brax_ppo / shac_bcg env steps to the best success's 50 %: 10.0x; 90 %: — (brax_ppo never, shac_bcg 2,000)."
        in table
    )
    summary.plot_curves(runs, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_steps_to_reach_is_none_when_never_reached():
    rows = [dict(env_steps=1, wall_clock=0, eval_return=0.0)]
    assert summary.steps_to_reach(rows, 1.0) is None


def cfg_env(path):
    """``G1Jump-v0.json``, ``G1Jump-v0.gpu.json`` and ``G1Jump-v0.<variant>.json`` configure G1Jump-v0."""
    return path.name.split(".")[0]


@pytest.mark.parametrize("path", sorted(protocol.CONFIGS.glob("*.json")), ids=lambda p: p.stem)
def test_committed_configs_are_accepted_by_their_algorithms(path):
    """Every task's own config and the GPU config (which no GPU has run yet) configure
    every algorithm; a variant (tuned, zero_start) configures the ones it names. All keys
    are checked."""
    cfg = protocol.load_config(cfg_env(path), path)
    algos = [a for a in protocol.ALGORITHMS if protocol.config_section(a) in cfg]
    if path.stem in (cfg_env(path), cfg_env(path) + ".gpu"):
        assert algos == list(protocol.ALGORITHMS)
    assert algos
    runners.validate_config(cfg, cfg_env(path), algos)


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


def test_sb3_learning_rate_constant_or_linear_to_min_lr():
    """SB3 calls the schedule with the fraction of the run remaining: 1 at the start, 0 at the end."""
    assert runners.sb3_learning_rate({"learning_rate": 3e-4}) == 3e-4
    linear = runners.sb3_learning_rate({"learning_rate": 3e-4, "lr_schedule": "linear", "min_lr": 1e-5})
    assert [linear(p) for p in (1.0, 0.5, 0.0)] == pytest.approx([3e-4, 1.55e-4, 1e-5])


#: Each run is a 2-8 minute XLA compile on 2 cores. SHAC exact also trains in
#: tests/learners/shac/test_train.py; it and Brax APG run here in the integration tier.
_SLOW = ("shac_exact", "brax_apg")


#: Learners that checkpoint at every evaluation and resume from it.
_RESUMABLE = ("sb3_ppo", "shac_exact", "shac_bcg")


@pytest.mark.integration
@pytest.mark.parametrize(
    "algo", [pytest.param(a, marks=pytest.mark.long) if a in _SLOW else a for a in protocol.ALGORITHMS]
)
def test_every_algorithm_runs_end_to_end(tmp_path, algo, monkeypatch):
    """Brax PPO takes the JAX env unchanged (``enable_brax`` aside); SHAC bcg is the demo's.
    Every row is scored by the shared protocol (here 3 episodes from ``EVAL_SEED``) and
    appended to the CSV as it is measured. SB3 PPO and SHAC run half the budget, stop, and
    resume from their checkpoint: the first half's rows stay, the run reaches the budget."""
    monkeypatch.setattr(protocol, "EVAL_EPISODES", 3)
    cfg = protocol.load_config("BoxPush-v0")
    cfg["brax_ppo"].update(num_envs=4, batch_size=4, num_minibatches=2, unroll_length=8, init_noise_std=0.37)
    cfg["shac"].update(num_envs=4, horizon=8, actor_hidden=[16], critic_hidden=[16])
    cfg["brax_apg"].update(num_envs=4, horizon_length=8)
    path, checkpoints = tmp_path / f"{algo}_seed0.csv", tmp_path / "checkpoints"
    first: list = []
    if algo in _RESUMABLE:
        runners.RUNNERS[algo]("BoxPush-v0", 256, 0, cfg, 1, protocol.Recorder("BoxPush-v0", path), checkpoints)
        first = run_csv.read_rows(path)
        assert first[-1]["env_steps"] >= 256 and any(checkpoints.iterdir())
        assert not run_csv.is_complete(path, 512)
    recorder = protocol.Recorder("BoxPush-v0", path, budget=512, train_backend=protocol.training_backend(algo, {}))
    runners.RUNNERS[algo]("BoxPush-v0", 512, 0, cfg, 1, recorder, checkpoints)
    assert run_csv.is_complete(path, 512)
    with path.open() as f:
        parsed = list(csv.DictReader(f))
    assert parsed and tuple(parsed[0]) == run_csv.CSV_FIELDS
    rows = run_csv.read_rows(path)
    # resumed: the rows before the checkpoint are kept (NaN counters of PPO compared as text)
    assert [{k: repr(v) for k, v in r.items()} for r in rows[: len(first)]] == [
        {k: repr(v) for k, v in r.items()} for r in first
    ]
    steps = [r["env_steps"] for r in rows]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert all(r["eval_episodes"] == 3 for r in rows)
    if algo != "brax_apg":  # APG exposes its policy only at the end
        assert steps[0] == 0 and len(rows) >= 2
    assert all(r["eval_return"] == r["eval_return"] for r in rows)  # no NaN
    assert 0.0 <= rows[-1]["eval_success"] <= 1.0  # every learner reports its final success
    assert rows[-1]["eval_length"] > 0
    # The clocks of a timing, and the final policy scored in the simulator it trained in
    # (MJX for the JAX learners; SB3 PPO trains where it is scored).
    assert rows[-1]["cpu_time"] > 0 and rows[-1]["others_cpu_time"] >= 0 and rows[-1]["cpus"] >= 1
    own = rows[-1]["train_sim_success"]
    assert math.isnan(own) if algo == "sb3_ppo" else 0.0 <= own <= 1.0
    # Simulated control steps: one per env step for PPO, >= 3 (forward, recompute, VJP) for
    # the gradient learners, more where bcg bundled.
    per_step = rows[-1]["sim_steps"] / rows[-1]["env_steps"]
    if "ppo" in algo:
        assert per_step == 1.0
    else:
        assert per_step >= 3.0
    # SHAC's own counters: skipped updates and the fraction of training steps bcg bundled.
    last = rows[-1]
    if algo.startswith("shac"):
        assert last["skipped_updates"] >= 0 and 0.0 <= last["bundled_fraction"] <= 1.0
        if algo == "shac_exact":
            assert last["bundled_fraction"] == 0.0
    else:
        assert math.isnan(last["skipped_updates"]) and math.isnan(last["bundled_fraction"])


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


def test_runs_longer_than_the_budget_are_scored_at_the_budget(tmp_path):
    """PPO run on to 4,096 env steps beside SHAC at 2,048: the table at 2,048 reads PPO's
    row at 2,048 (return 3, not its later 10); the plot keeps the whole run; a table at
    4,096 reads the later row."""
    _write(tmp_path / "sb3_ppo_seed0.csv", [(0, 0, -10), (2048, 5, 3), (4096, 9, 10)])
    _write(tmp_path / "shac_exact_seed0.csv", [(0, 0, -10), (2048, 5, 12)])
    budgets = {"sb3_ppo": 2048, "shac_exact": 2048}
    runs = run_csv.read_runs(tmp_path, budgets)
    assert len(runs["sb3_ppo"][0]) == 3  # whole runs for the plot
    cut = run_csv.at_budget(runs, budgets)
    assert [row["env_steps"] for row in cut["sb3_ppo"][0]] == [0, 2048]
    table = summary.summary_table(cut)
    assert "| sb3_ppo | 1 | 3.00 ± 0.00 |" in table and "| shac_exact | 1 | 12.00 ± 0.00 |" in table
    summary.plot_curves(runs, tmp_path / "curves.png", budget=2048)
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert "| sb3_ppo | 1 | 10.00 ± 0.00 |" in summary.summary_table(
        run_csv.at_budget(runs, {"sb3_ppo": 4096, "shac_exact": 4096})
    )


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
    with path.open() as f:
        parsed = list(csv.DictReader(f))
    assert [r["env_steps"] for r in parsed] == ["0", "100", "200"]
    assert {r["eval_episodes"] for r in parsed} == {"64"}


def test_rows_appended_to_an_older_csv_keep_its_columns(tmp_path):
    """A run resumed by newer code appends in the columns its CSV was started with, and
    the columns an older CSV lacks read back as NaN."""
    path = tmp_path / "shac_bcg_seed0.csv"
    old_fields = run_csv.CSV_FIELDS[:7]
    path.write_text(",".join(old_fields) + "\n0,0.0,1.0,2.0,0.0,200.0,64\n")
    run_csv.append_row(
        path,
        dict(
            env_steps=100,
            sim_steps=300.0,
            wall_clock=2.0,
            eval_return=3.0,
            eval_success=0.5,
            eval_length=200.0,
            eval_episodes=64,
            skipped_updates=1,
            bundled_fraction=0.02,
        ),
    )
    with path.open() as f:
        parsed = list(csv.DictReader(f))
    assert tuple(parsed[0]) == old_fields and len(parsed) == 2
    rows = run_csv.read_rows(path)
    assert rows[1]["env_steps"] == 100 and math.isnan(rows[1]["bundled_fraction"])


@pytest.mark.parametrize("std", [1.0, 0.37])
def test_brax_ppo_init_noise_std_sets_the_initial_policy_std(std):
    """Brax's default tanh-normal policy ignores ``init_noise_std``; the config key selects
    the Gaussian policy whose initial std (action scale) is the value."""
    import jax

    networks = runners.brax_ppo_network_factory(std)(observation_size=5, action_size=3)
    params = networks.policy_network.init(jax.random.PRNGKey(0))
    logits = networks.policy_network.apply(None, params, jax.numpy.zeros((1, 5)))
    dist = networks.parametric_action_distribution.create_dist(logits)
    assert dist.scale.shape == (1, 3)
    assert np.allclose(dist.scale, std, rtol=1e-5)
    assert runners.brax_ppo_network_factory(None) is None
    with pytest.raises(ValueError, match="init_noise_std"):
        runners.brax_ppo_network_factory(-1.0)


@pytest.mark.integration  # ~1.5 min: a Brax PPO and a SHAC compile
def test_shac_runs_after_brax_ppo_in_one_process(tmp_path, monkeypatch):
    """Both learners share the cached JAX env; Brax PPO's sharded trainer is the first to use
    its MJX model, which must still be a plain concrete model for SHAC's programs (it used
    to carry Brax's ``"i"`` mesh axis: "Mesh for all inputs should be equal")."""
    monkeypatch.setattr(protocol, "EVAL_EPISODES", 2)
    cfg = protocol.load_config("BoxPush-v0")
    cfg["env_kwargs"] = {"physics_dt": 0.004}  # the default step, but an env no other test made
    cfg["brax_ppo"].update(num_envs=4, batch_size=4, num_minibatches=2, unroll_length=8)
    cfg["shac"].update(num_envs=4, horizon=8, actor_hidden=[16], critic_hidden=[16])
    for algo in ("brax_ppo", "shac_exact"):
        path = tmp_path / f"{algo}_seed0.csv"
        runners.RUNNERS[algo]("BoxPush-v0", 256, 0, cfg, 1, protocol.Recorder("BoxPush-v0", path), tmp_path / "ck")
        assert run_csv.is_complete(path, 256)


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
