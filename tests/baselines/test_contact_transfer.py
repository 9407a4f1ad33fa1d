"""``baselines.contact_transfer``: three physics per final policy, and their table."""

import pytest

from baselines import contact_transfer, protocol
from baselines.seed_stats import seed_interval


def test_score_puts_each_side_of_each_sim_to_sim_in_its_physics(tmp_path, monkeypatch):
    """MJX under the trained model, MJX under MuJoCo's contact and MuJoCo C under it; MuJoCo
    C always runs the MuJoCo-contact env; runs already scored are skipped."""
    import bcg_envs.sim2sim

    runs = [("shac_exact", 0, tmp_path / "a", 1000), ("sb3_ppo", 1, tmp_path / "b", 1000)]
    monkeypatch.setattr(contact_transfer, "final_runs", lambda out, steps: runs)
    monkeypatch.setitem(contact_transfer.POLICIES, "sb3_ppo", lambda path: "policy")
    calls = []

    def fake_sim_to_sim(env, policy, episodes, seed, mujoco_env):
        model = env.unwrapped.jax_env.contact_model
        calls.append((model, mujoco_env.contact_model, policy, episodes, seed))
        base = 0.0 if model == "moreau" else 0.5
        return {
            "success_rate_mjx": base,
            "falls_mjx": 1 + base,
            "penetration_mm_mjx": 2 + base,
            "success_rate": 0.25,
            "falls": 7,
            "penetration_mm": 0.4,
        }

    monkeypatch.setattr(bcg_envs.sim2sim, "sim_to_sim", fake_sim_to_sim)
    kwargs = {"contact_model": "moreau", "kappa": 50.0, "config": {"episode_length": 40}}
    done = [dict(algo="shac_exact", seed="0", env_steps="1000")]
    rows = contact_transfer.score("BoxPush-v0", tmp_path, 1000, kwargs, done)
    episodes = protocol.EVAL_EPISODES
    assert calls == [(m, "mujoco", "policy", episodes, protocol.EVAL_SEED) for m in ("moreau", "mujoco")]
    got = [(r["physics"], r["success_rate"], r["falls"], r["penetration_mm"]) for r in rows]
    assert got == [
        ("MJX, trained contact model", 0.0, 1.0, 2.0),
        ("MJX, MuJoCo contact", 0.5, 1.5, 2.5),
        ("MuJoCo C, MuJoCo contact", 0.25, 7, 0.4),
    ]
    assert {(r["algo"], r["seed"], r["env_steps"], r["episodes"]) for r in rows} == {("sb3_ppo", 1, 1000, episodes)}


def test_table_gives_seed_means_with_bootstrap_intervals_per_physics():
    rows = [
        dict(algo="sb3_ppo", seed=s, physics=p, episodes=64, success_rate=rate, falls=falls, penetration_mm=depth)
        for s, rate, falls, depth in ((0, 0.25, 16, 8.0), (1, 0.5, 32, 9.0))
        for p, _, _ in contact_transfer.PHYSICS
    ]
    text = contact_transfer.table(rows)
    mean, low, high = seed_interval([25.0, 50.0])
    assert f"| sb3_ppo | 2 | MJX, MuJoCo contact | {mean:.1f} % [{low:.1f}, {high:.1f}] | 0.38 [" in text
    assert text.count("| sb3_ppo | 2 |") == 3
    assert "| 8.5 [8.0, 9.0] |" in text


def test_main_refuses_runs_under_mujoco_contact(tmp_path):
    config = protocol.CONFIGS / "G1Jump-v0.tuned.json"
    with pytest.raises(SystemExit, match="no contact model to separate"):
        contact_transfer.main(["--out", str(tmp_path), "--steps", "1000", "--config", str(config)])
