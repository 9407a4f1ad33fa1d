"""The README's demo: its sections, summary and files (MuJoCo C backend, small budgets), the
gradient table's push at full length, and the scripted push."""

import subprocess
import sys

import numpy as np
import pytest

from bcg_envs import demo
from bcg_envs.gradients.registry import ESTIMATORS


@pytest.mark.integration
def test_demo_prints_its_sections_and_summary_and_writes_its_files(tmp_path):
    """The whole demo at tiny sizes through the command line, in a fresh process: headings,
    the learners' names, a three-line summary, the files, and a clean exit (no renderer
    left to ``Renderer.__del__`` at shutdown)."""
    out = tmp_path / "demo"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bcg_envs.cli",
            "demo",
            "--out",
            str(out),
            "--steps",
            "6",
            "--boxpush-episodes",
            "2",
            "--g1jump-episodes",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    text = proc.stdout
    for heading in ("[1/3] Gradients", "[2/3] BoxPush", "[3/3] G1Jump", "Summary"):
        assert heading in text
    assert "SB3 PPO" in text and "SHAC exact" in text and "trained" not in text
    summary = (out / "summary.txt").read_text().splitlines()
    assert len(summary) == 3 and summary[0].startswith("Gradients:")
    assert summary[1].startswith("BoxPush-v0:") and summary[2].startswith("G1Jump-v0:")
    assert "scripted push" in summary[1] and "do nothing" in summary[1]
    assert text.rstrip().endswith(summary[2])
    table = (out / "gradients.md").read_text().splitlines()
    assert [line.split("|")[1].strip() for line in table[2:]] == list(ESTIMATORS)
    for line in table[2:]:
        mean_A, max_A, mean_B = (float(c) for c in line.split("|")[2:5])
        assert np.isfinite([mean_A, max_A, mean_B]).all() and max_A >= mean_A > 0
    for name in ("gradients.png", "rollout.mp4", "boxpush_success.png", "boxpush_policies.mp4", "g1jump_success.png"):
        assert (out / name).stat().st_size > 1000, name


def test_gradient_push_runs_its_full_length_in_one_episode():
    """Five ``grad_step`` calls per control step from the restored state (step counter
    included) count one episode step: the 100-step push is not cut at 200 / 5 = 40 steps."""
    stats, trace = demo.gradient_statistics(steps=100, seed=0, backend="mujoco")
    assert trace["step"] == list(range(1, 101))
    assert not any(trace["ended"])
    assert all(len(s["norm_A"]) == 100 for s in stats.values())


def test_policy_summary_names_the_leader_only_beyond_the_intervals():
    ok, bad = {"successes": np.array([True] * 60 + [False] * 4)}, {"successes": np.zeros(64, bool)}
    line = demo.policy_summary("BoxPush-v0", {"SHAC exact": ok, "SB3 PPO": bad, "do nothing": bad}, ["do nothing"])
    assert "SHAC exact 94 %, SB3 PPO 0 %" in line and "SHAC exact ahead beyond the 95 % intervals" in line
    assert line.endswith("references: do nothing 0 %.")
    close = {"successes": np.array([True] * 58 + [False] * 6)}
    assert "no clear winner" in demo.policy_summary("BoxPush-v0", {"A": ok, "B": close}, [])


def test_scripted_push_drives_at_the_box_once_behind_it():
    obs = np.zeros(17, np.float32)
    obs[11:13] = [0.2, 0.0]  # goal is +x of the box
    obs[13:15] = [0.1, 0.0]  # box is 10 cm +x of the pusher: pusher behind it, on the line
    np.testing.assert_allclose(demo.scripted_push(obs), [1.0, 0.0], atol=1e-5)
    obs[13:15] = [-0.1, 0.0]  # pusher past the box: around the box (sideways), never through it
    action = demo.scripted_push(obs)
    assert abs(action[1]) > 0.5 and action[0] > -0.1


def test_scripted_push_strikes_the_box_early():
    """The demo's scripted policy in closed loop (MuJoCo C) strikes the box (a stiff
    impact) within 25 steps (1 s); reaching the goal is checked through ``scripted_episodes``."""
    import gymnasium as gym

    env = gym.make("bcg_envs/BoxPush-v0", backend="mujoco")
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        forces = []
        for _ in range(25):
            obs, _, terminated, truncated, info = env.step(demo.scripted_push(obs))
            forces.append(info["max_contact_force"])
            assert not (terminated or truncated)
        assert max(forces) > 10.0  # above BoxPush's bcg threshold
    env.close()


def test_scripted_episodes_finish_near_the_goal():
    r = demo.scripted_episodes(episodes=3)
    assert all(v.shape == (3,) for v in r.values())
    assert np.all(r["final_distance"] < 0.02) and np.all(r["start_distance"] > 0.1)
    assert np.all(r["success"]) and np.all(r["length"] == 200)
    assert np.all(r["return"] > 150.0)  # a zero action scores about 76 (tests/envs/box_push)
