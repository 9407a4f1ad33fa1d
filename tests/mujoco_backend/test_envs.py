"""bcg_envs/mujoco_backend/envs.py through `GymEnv`/`GymVectorEnv(backend="mujoco")`: gym.make,
the Gymnasium and SB3 env checkers, bad inputs, the vector env against the single env, and
``is_success`` against the MJX backend."""

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)
from bcg_envs.gym import GymEnv, GymVectorEnv
from bcg_envs.mujoco_backend import MujocoBatchSimulation, MujocoSimulation
from tests.mujoco_backend.conftest import ENV_ID, TASKS, JittedMjxStates, smooth_action, task_info_of


# ----- Gymnasium / SB3 contract ---------------------------------------------------------------
def test_make_returns_mujoco_backend():
    e = gym.make(ENV_ID, backend="mujoco")
    assert isinstance(e.unwrapped.simulation, MujocoSimulation)
    assert isinstance(e.unwrapped.model, mujoco.MjModel)
    e.close()


def test_gymnasium_check_env(no_space_warnings):
    from gymnasium.utils.env_checker import check_env

    e = gym.make(ENV_ID, backend="mujoco", render_mode="rgb_array", width=64, height=48)
    with no_space_warnings():
        check_env(e.unwrapped)
    e.reset(seed=0)
    img = e.render()
    assert img.shape == (48, 64, 3) and img.dtype == np.uint8 and img.std() > 1.0
    e.close()


def test_sb3_check_env(no_space_warnings):
    from stable_baselines3.common.env_checker import check_env

    e = gym.make(ENV_ID, backend="mujoco")
    with no_space_warnings():
        check_env(e)
    e.close()


def test_bad_inputs():
    e = GymEnv("BoxPush-v0", backend="mujoco")
    with pytest.raises(RuntimeError, match="reset"):
        e.step(np.zeros(2, np.float32))
    with pytest.raises(RuntimeError, match="reset"):
        e.grad_step(np.zeros(2, np.float32))
    with pytest.raises(RuntimeError, match="reset"):
        e.get_state()
    e.reset(seed=0)
    for bad, match in (
        (np.zeros(3, np.float32), r"action must have shape \(2,\)"),
        (np.zeros((1, 2), np.float32), r"action must have shape \(2,\)"),
        (np.array(["a", "b"]), "action must be a real-valued array"),
        (np.array([np.nan, 0.0], np.float32), "action must be finite"),
        (np.array([True, False]), "action must be a real-valued array"),
    ):
        with pytest.raises(ValueError, match=match):
            e.step(bad)
        with pytest.raises(ValueError, match=match):
            e.grad_step(bad)
    with pytest.raises(ValueError, match="estimator"):
        e.grad_step(np.zeros(2, np.float32), estimator="nope")
    with pytest.raises(ValueError, match="bundle"):
        e.grad_step(np.zeros(2, np.float32), bundle={"num_samples": 3})
    with pytest.raises(ValueError, match="qpos"):
        e.set_state(np.zeros(4), np.zeros(5))
    with pytest.raises(ValueError, match="render_mode"):
        GymEnv("BoxPush-v0", backend="mujoco", render_mode="human")
    with pytest.raises(ValueError, match="unknown env id"):
        GymEnv("Nope-v0", backend="mujoco")
    e.close()


# ----- vector env -----------------------------------------------------------------------------
def test_vector_env_step_grad_step_and_autoreset():
    n = 3
    v = gym.make_vec(
        ENV_ID, num_envs=n, vectorization_mode="vector_entry_point", backend="mujoco", config={"episode_length": 4}
    )
    assert isinstance(v.simulation, MujocoBatchSimulation)
    obs, info = v.reset(seed=0)
    assert obs.shape == (n, 17) and obs.dtype == np.float32 and info["step"].dtype == np.int32
    rng = np.random.default_rng(0)
    for t in range(4):
        obs, rew, term, trunc, info = v.step(rng.uniform(-1, 1, (n, 2)).astype(np.float32))
        assert obs.shape == (n, 17) and rew.shape == (n,) and rew.dtype == np.float32
    assert trunc.all() and info["_final_obs"].all()
    assert (info["step"] == 4).all()
    assert info["is_success"].dtype == bool and info["is_success"].shape == (n,)
    assert not np.allclose(info["final_obs"], obs)  # obs is the new episodes' first
    out = v.grad_step(rng.uniform(-1, 1, (n, 2)).astype(np.float32), estimator="bcg")
    assert out.jacobians.A.shape == (n, 10, 10) and out.jacobians.B.shape == (n, 10, 2)
    assert out.jacobians.r_x.shape == (n, 10) and out.jacobians.r_a.shape == (n, 2)
    assert out.jacobians.C.shape == (n, 17, 10)
    assert out.observation.shape == (n, 17) and out.info["bundle_dropped"].shape == (n,)
    with pytest.raises(ValueError, match=r"actions must have shape"):
        v.step(np.zeros((n + 1, 2), np.float32))
    v.close()


def test_vector_env_matches_single_env():
    """Rollout-based batch stepping tracks the single env's mj_step loop. Not bit for bit:
    the replay that recovers contact forces skips contact-free substeps, so the warmstart
    it hands the next rollout differs from mj_step's within the (4-iteration) solver's
    convergence, which moves BoxPush's velocities by ~1e-5 (measured 5e-5 at most)."""
    v = GymVectorEnv("BoxPush-v0", 2, backend="mujoco")
    v.reset(seed=0)
    s = GymEnv("BoxPush-v0", backend="mujoco")
    s.reset(seed=0)
    qpos, qvel = np.array([-0.12, 0.0, 0.0, 0.0, 0.0]), np.array([0.8, 0.0, 0.0, 0.0, 0.0])
    for core in v.simulation.cores:
        core.load(qpos, qvel, None, dict(s.simulation.core.info))
    s.set_state(qpos, qvel)
    forces = []
    for t in range(40):
        a = smooth_action(t, 2, amp=0.9)
        o1, r1, _, _, i1 = s.step(a)
        o2, r2, _, _, i2 = v.step(np.stack([a, a]))
        np.testing.assert_array_equal(o2[0], o2[1])
        np.testing.assert_allclose(o2[0], o1, atol=5e-4)
        np.testing.assert_allclose(i2["max_contact_force"], i1["max_contact_force"], rtol=1e-3, atol=1e-3)
        forces.append(i1["max_contact_force"])
    assert max(forces) > 0
    v.close()
    s.close()


# ----- success ------------------------------------------------------------------------------
def _success_cases(name, task):
    """(qpos, qvel, action, expected is_success) around the episode's goal."""
    if name == "BoxPush-v0":
        goal, goal_yaw = np.asarray(task["goal"], float), float(task["goal_yaw"])
        side = -0.15 if goal[0] > 0 else 0.15  # the pusher parked clear of the box
        out = []
        for (dx, dyaw), expected in (
            ((0.0, 0.0), True),
            ((0.012, 0.15), True),
            ((0.03, 0.0), False),
            ((0.0, 0.3), False),
        ):
            box = goal + [dx, 0.0]
            out.append(
                (np.array([box[0] + side, box[1], box[0], box[1], goal_yaw + dyaw]), np.zeros(5), np.zeros(2), expected)
            )
        return out
    from bcg_envs.envs.planar_hand.hand import OPEN_POSE

    goal_yaw = float(task["goal_yaw"])
    return [
        (np.array([*OPEN_POSE, 0.0, 0.0, goal_yaw + dyaw]), np.zeros(7), -np.ones(4), expected)
        for dyaw, expected in ((0.0, True), (0.06, True), (0.2, False), (-0.2, False))
    ]


@pytest.mark.parametrize("name", TASKS[:2])
def test_is_success_agrees_between_backends(name):
    """Hand-built states at and off the goal: both backends report the same
    ``info["is_success"]`` (a bool), which the JAX ``State`` also holds in ``metrics``."""
    c = gym.make(f"bcg_envs/{name}", backend="mujoco").unwrapped
    m = gym.make(f"bcg_envs/{name}").unwrapped  # the MJX env (its jitted step is shared with tests/envs)
    _, info = c.reset(seed=1)
    assert info["is_success"] is False
    m.reset(seed=1)
    ref = JittedMjxStates(m.jax_env)
    task = task_info_of(c.simulation.core.info)
    for qpos, qvel, action, expected in _success_cases(name, task):
        c.set_state(qpos, qvel)
        m.simulation.state = ref.state(qpos, qvel, task)
        *_, ic = c.step(action.astype(np.float32))
        *_, im = m.step(action.astype(np.float32))
        assert ic["is_success"] is expected and im["is_success"] is expected, (qpos, ic["is_success"], im["is_success"])
        assert m.simulation.state.info["is_success"].dtype == bool
        assert float(m.simulation.state.metrics["is_success"]) == float(expected)
    c.close()
    m.close()


def test_a_script_that_never_closes_its_rendering_env_exits_cleanly():
    """The renderer is closed at interpreter exit while the GL library is still loaded, so
    a script that renders and never calls ``close`` ends without ``Renderer.__del__`` errors."""
    import subprocess
    import sys

    script = (
        "import gymnasium as gym, bcg_envs\n"
        "env = gym.make('bcg_envs/BoxPush-v0', backend='mujoco', render_mode='rgb_array', width=64, height=48)\n"
        "env.reset(seed=0)\n"
        "assert env.render().shape == (48, 64, 3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
