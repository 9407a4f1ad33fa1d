"""The README's demo: gradient table of every estimator on the MuJoCo C backend."""

import numpy as np

from bcg_envs import demo
from bcg_envs.gradients.config import ESTIMATORS


def test_demo_writes_a_finite_table_plot_and_video(tmp_path):
    demo.main(out_dir=str(tmp_path), steps=6, seed=0, backend="mujoco")
    table = (tmp_path / "gradients.md").read_text().splitlines()
    assert [line.split("|")[1].strip() for line in table[2:]] == list(ESTIMATORS)
    for line in table[2:]:
        mean_A, max_A, mean_B = (float(c) for c in line.split("|")[2:5])
        assert np.isfinite([mean_A, max_A, mean_B]).all() and max_A >= mean_A > 0
    assert (tmp_path / "gradients.png").stat().st_size > 1000
    assert (tmp_path / "rollout.mp4").stat().st_size > 1000


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
