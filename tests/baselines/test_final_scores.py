"""``baselines.final_scores``: which runs it scores and how it summarizes them."""

import pytest

from baselines import final_scores, protocol, run_csv


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


def row(algo, seed, success, falls, err, success_mjx=0.0):
    out = dict(algo=algo, seed=seed, env_steps=1000, episodes=10)
    for sfx, s in (("", success), ("_mjx", success_mjx)):
        out.update(
            {
                f"success_rate{sfx}": s,
                f"falls{sfx}": falls,
                f"completed{sfx}": 10 - falls,
                f"tracking_error_cm{sfx}": err,
                f"joint_error_rad{sfx}": 0.1,
            }
        )
    return out


def test_table_pools_success_over_seeds_and_averages_the_rest():
    text = final_scores.table(
        [
            row("shac_exact", 0, 0.2, 2, 10.0),
            row("shac_exact", 1, 0.6, 4, 14.0),
            row("sb3_ppo", 0, 1.0, 0, 5.0, success_mjx=0.5),
        ]
    )
    lines = text.splitlines()
    shac_c = next(line for line in lines if line.startswith("| shac_exact | 2 | MuJoCo C"))
    # 8 of 20 episodes: 40 %, Wilson interval [21.9, 61.3]
    assert "40.0 % [21.9, 61.3]" in shac_c
    assert "| 0.30 +- 0.10 |" in shac_c  # falls per episode: 0.2 and 0.4
    assert "| 12.0 +- 2.0 | 0.100 +- 0.000 |" in shac_c  # tracking error (cm), joint error (rad)
    ppo_mjx = next(line for line in lines if line.startswith("| sb3_ppo | 1 | MJX"))
    assert "50.0 %" in ppo_mjx
    assert lines.index(ppo_mjx) < lines.index(shac_c)  # algorithms in name order


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
    done = [dict(algo="sb3_ppo", seed="0", env_steps="1000", episodes="8")]
    rows = final_scores.score_runs(
        "BoxPush-v0", tmp_path, 1000, episodes=8, done=done, env_kwargs={"config": {"episode_length": 40}}
    )
    assert calls == [("BoxPush-v0", 40, ("policy of", tmp_path / "b"), 8, protocol.EVAL_SEED)]  # the runs' env_kwargs
    assert rows == [
        dict(
            algo="shac_exact",
            seed=1,
            env_steps=1000,
            episodes=8,
            success_rate=0,
            falls=1,
            completed=2,
            tracking_error_cm=3,
            joint_error_rad=4,
            success_rate_mjx=10,
            falls_mjx=11,
            completed_mjx=12,
            tracking_error_cm_mjx=13,
            joint_error_rad_mjx=14,
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
