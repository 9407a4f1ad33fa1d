"""baselines/friction_switches.py: the measurement behind bcg having no dry-friction trigger."""

import csv

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import bcg_envs  # noqa: F401
from baselines import friction_switches as fs


@pytest.fixture(scope="module")
def env():
    e = gym.make("bcg_envs/BoxPush-v0", backend="mujoco")
    e.reset(seed=0)
    yield e.unwrapped
    e.close()


def _start(env, box_velocity):
    """Pusher parked away from the box, the box sliding along x at ``box_velocity``."""
    qpos, qvel = env.get_state()[:2]
    qpos, qvel = qpos.copy(), np.zeros_like(qvel)
    qpos[:2] = [-0.4, 0.4]
    qvel[2] = box_velocity
    env.set_state(qpos, qvel)
    d = mujoco.MjData(env.model)
    mujoco.mj_copyData(d, env.model, env.data)
    return d


@pytest.mark.parametrize("velocity, stops", [(0.0, False), (0.02, True), (1.0, False)])
def test_regime_change_is_a_box_starting_or_stopping(env, velocity, stops):
    """Dry friction's force saturates while the box slides: 2 cm/s stops within the 40 ms
    control step (0.8 N on 0.5 kg decelerates 1.6 m/s^2), 1 m/s and rest do not switch."""
    substeps = int(env.jax_env.physics.n_substeps)
    assert fs.regime_changed(env.model, _start(env, velocity), np.zeros(env.model.nu), substeps) is stops


def test_control_step_differences_match_grad_step_where_smooth(env):
    """The script's own central differences equal the C backend's exact Jacobian on a
    freely sliding box (tangent coordinates, same step size)."""
    start = _start(env, 1.0)
    ctrl = np.zeros(env.model.nu)
    A = fs.control_step_fd(env.model, start, ctrl, int(env.jax_env.physics.n_substeps), 1e-6)
    ref = env.grad_step(np.zeros(2, np.float32), estimator="exact").jacobians.A
    assert A.shape == ref.shape
    np.testing.assert_allclose(A, ref, atol=1e-4 * np.abs(ref).max())


def test_main_writes_every_group(tmp_path):
    groups, tops = fs.main(["--env", "BoxPush-v0", "--episodes", "1", "--top", "0", "--out", str(tmp_path)])
    rows = list(csv.DictReader(open(tmp_path / "friction_switches.csv")))
    assert {(r["policy"], r["group"]) for r in rows} == {
        (p, g) for p in ("scripted", "random") for g in ("onset", "sustained", "friction_switch", "smooth")
    }
    scripted = {r["group"]: int(r["steps"]) for r in rows if r["policy"] == "scripted"}
    assert scripted["onset"] > 0 and scripted["smooth"] > 0 and tops == []
