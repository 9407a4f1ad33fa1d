"""``baselines.final_scores``: which runs it scores and how it summarizes them."""

import csv

import pytest

from baselines import final_scores, protocol, run_csv
from baselines.seed_stats import seed_interval


def write_run(out, name, last_steps, checkpoint=True):
    rows = [
        dict(
            env_steps=s,
            sim_steps=float(s),
            wall_clock=1.0,
            eval_return=1.0,
            eval_success=0.5,
            eval_length=10.0,
            eval_episodes=64,
        )
        for s in (0, last_steps)
    ]
    run_csv.write_csv(out / f"{name}.csv", rows)
    if checkpoint:
        (out / "checkpoints" / name).mkdir(parents=True)


def test_final_runs_takes_complete_checkpointed_runs_only(tmp_path, monkeypatch):
    write_run(tmp_path, "sb3_ppo_seed0", 1000)
    write_run(tmp_path, "shac_exact_seed1", 1000)
    write_run(tmp_path, "shac_bcg_seed2", 500)  # incomplete
    write_run(tmp_path, "shac_exact_seed3", 1000, checkpoint=False)
    write_run(tmp_path, "brax_ppo_seed0", 1000)  # no checkpointed policy to load
    monkeypatch.setattr(final_scores, "checkpoint_steps", lambda algo, path: 1000)
    runs = final_scores.final_runs(tmp_path, 1000)
    assert [(a, s, n) for a, s, _, n in runs] == [("sb3_ppo", 0, 1000), ("shac_exact", 1, 1000)]
    assert runs[0][2] == tmp_path / "checkpoints" / "sb3_ppo_seed0"


def test_final_runs_refuses_a_checkpoint_older_than_the_csv(tmp_path, monkeypatch):
    write_run(tmp_path, "shac_exact_seed0", 1000)
    monkeypatch.setattr(final_scores, "checkpoint_steps", lambda algo, path: 800)
    with pytest.raises(ValueError, match="800 env steps"):
        final_scores.final_runs(tmp_path, 1000)


def row(algo, seed, success, falls, err, success_mjx=0.0, err_no_fall=None):
    out = dict(algo=algo, seed=seed, env_steps=1000, episodes=10, env_kwargs="{}")
    for sfx, s in (("", success), ("_mjx", success_mjx)):
        out.update(
            {
                f"success_rate{sfx}": s,
                f"falls{sfx}": falls,
                f"completed{sfx}": 10 - falls,
                f"tracking_error_cm{sfx}": err,
                f"joint_error_rad{sfx}": 0.1,
                f"tracking_error_cm_no_fall{sfx}": err if err_no_fall is None else err_no_fall,
                f"joint_error_rad_no_fall{sfx}": 0.1,
            }
        )
    return out


def test_table_gives_seed_means_with_bootstrap_intervals_beside_pooled_success():
    text = final_scores.table(
        [
            row("shac_exact", 0, 0.2, 2, 10.0),
            row("shac_exact", 1, 0.6, 4, 14.0, err_no_fall=float("nan")),
            row("sb3_ppo", 0, 1.0, 0, 5.0, success_mjx=0.5),
        ]
    )
    lines = text.splitlines()
    shac_c = next(line for line in lines if line.startswith("| shac_exact | 2 | MuJoCo C"))
    _, low, high = seed_interval([20.0, 60.0])
    assert f"| 40.0 % [{low:.1f}, {high:.1f}] |" in shac_c  # seed mean of 20 % and 60 %
    assert "| 40.0 % [21.9, 61.3] |" in shac_c  # pooled: 8 of 20 episodes, Wilson interval
    assert "| 0.30 [" in shac_c  # falls per episode: 0.2 and 0.4
    assert "| 10.0 (1 of 2 seeds) | 12.0 [" in shac_c  # no error without a fall where every episode fell
    ppo_mjx = next(line for line in lines if line.startswith("| sb3_ppo | 1 | MJX"))
    assert "| 50.0 % |" in ppo_mjx  # one seed: no interval
    assert lines.index(ppo_mjx) < lines.index(shac_c)  # algorithms in name order


def test_table_shows_a_dash_for_metrics_a_row_lacks_and_refuses_one_run_twice():
    old = row("shac_exact", 0, 0.5, 1, 9.0)
    del old["tracking_error_cm_no_fall"], old["tracking_error_cm_no_fall_mjx"]
    line = final_scores.table([old]).splitlines()[2]
    assert line.endswith("| — | 9.0 |")
    with pytest.raises(ValueError, match="one run twice"):
        final_scores.table([row("shac_exact", 0, 0.5, 1, 9.0), dict(row("shac_exact", 0, 0.5, 1, 9.0), env_steps=2000)])


def test_main_refuses_a_file_scored_under_other_env_kwargs(tmp_path):
    path = tmp_path / "final_scores.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=final_scores.COLUMNS)
        writer.writeheader()
        writer.writerow(row("shac_exact", 0, 0.5, 1, 9.0))  # env_kwargs {}
    config = protocol.CONFIGS / "G1Jump-v0.moreau_k300.json"
    with pytest.raises(SystemExit, match="pass the runs' --config"):
        final_scores.main(["--out", str(tmp_path), "--steps", "1000", "--config", str(config), "--episodes", "10"])


def test_score_runs_runs_each_final_policy_once_in_both_simulators(tmp_path, monkeypatch):
    import bcg_envs.sim2sim

    runs = [("sb3_ppo", 0, tmp_path / "a", 1000), ("shac_exact", 1, tmp_path / "b", 1000)]
    monkeypatch.setattr(final_scores, "final_runs", lambda out, steps: runs)
    monkeypatch.setitem(final_scores.POLICIES, "shac_exact", lambda path: ("policy of", path))
    calls = []

    def fake_sim_to_sim(env, policy, episodes, seed, mujoco_env):
        assert mujoco_env is None  # MuJoCo contact: MuJoCo C runs the MJX side's env
        calls.append((env.unwrapped.env_name, env.unwrapped.jax_env.episode_length, policy, episodes, seed))
        return {f"{m}{s}": i + (10 if s else 0) for s in ("", "_mjx") for i, m in enumerate(final_scores.METRICS)}

    monkeypatch.setattr(bcg_envs.sim2sim, "sim_to_sim", fake_sim_to_sim)
    kwargs = {"config": {"episode_length": 40}}
    done = [
        dict(row("sb3_ppo", 0, 0.5, 0, 1.0), episodes=8, env_kwargs=final_scores.kwargs_key(kwargs)),
        dict(row("shac_exact", 1, 0.5, 0, 1.0), episodes=8, env_kwargs="{}"),  # scored under other kwargs
    ]
    rows = final_scores.score_runs("BoxPush-v0", tmp_path, 1000, episodes=8, done=done, env_kwargs=kwargs)
    assert calls == [("BoxPush-v0", 40, ("policy of", tmp_path / "b"), 8, protocol.EVAL_SEED)]  # the runs' env_kwargs
    assert rows == [
        dict(
            algo="shac_exact",
            seed=1,
            env_steps=1000,
            episodes=8,
            env_kwargs='{"config": {"episode_length": 40}}',
            success_rate=0,
            falls=1,
            completed=2,
            tracking_error_cm=3,
            joint_error_rad=4,
            tracking_error_cm_no_fall=5,
            joint_error_rad_no_fall=6,
            success_rate_mjx=10,
            falls_mjx=11,
            completed_mjx=12,
            tracking_error_cm_mjx=13,
            joint_error_rad_mjx=14,
            tracking_error_cm_no_fall_mjx=15,
            joint_error_rad_no_fall_mjx=16,
        )
    ]


def test_score_runs_transfers_kappa_runs_to_mujoco_contact(tmp_path, monkeypatch):
    """Runs trained under the Moreau model are scored in MJX under that model and in
    MuJoCo C under MuJoCo's contact, with the config's other env kwargs on both."""
    import bcg_envs.sim2sim

    monkeypatch.setattr(final_scores, "final_runs", lambda out, steps: [("shac_bcg", 0, tmp_path, 1000)])
    monkeypatch.setitem(final_scores.POLICIES, "shac_bcg", lambda path: "policy")
    seen = {}

    def fake_sim_to_sim(env, policy, episodes, seed, mujoco_env):
        seen.update(mjx=env.unwrapped.jax_env, mujoco=mujoco_env)
        return {f"{m}{s}": 0.0 for s in ("", "_mjx") for m in final_scores.METRICS}

    monkeypatch.setattr(bcg_envs.sim2sim, "sim_to_sim", fake_sim_to_sim)
    kwargs = {"contact_model": "moreau", "kappa": 50.0, "config": {"episode_length": 40}}
    final_scores.score_runs("BoxPush-v0", tmp_path, 1000, episodes=2, env_kwargs=kwargs)
    assert seen["mjx"].contact_model == "moreau" and seen["mjx"].physics.moreau.kappa == 50.0
    assert seen["mujoco"].contact_model == "mujoco"
    assert seen["mujoco"].episode_length == seen["mjx"].episode_length == 40


def test_mujoco_contact_kwargs_drop_only_the_kappa_model():
    kwargs = {"contact_model": "moreau", "kappa": 300.0, "contact_options": {"prox_iterations": 5}, "config": {"a": 1}}
    assert protocol.mujoco_contact_kwargs(kwargs) == {"config": {"a": 1}}
