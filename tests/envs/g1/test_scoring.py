"""Scoring of the G1 tracking tasks: residual actions, reference-state initialization,
per-episode metrics, success, and that ending an episode early never pays.

Nothing here compiles an MJX step: the hooks run eagerly on ``mjx.put_data`` states, and
the episode tests step MuJoCo C (``backend="mujoco"``, the same task code).
"""

import gymnasium as gym
import jax
import mujoco
import numpy as np
import pytest
from mujoco import mjx

import bcg_envs  # noqa: F401  (registers the ids)
from bcg_envs.envs.g1.scripted import (
    episode_summary,
    format_row,
    hold_pose_policy,
    reference_policy,
)
from bcg_envs.envs.g1.tracking import G1Squat
from bcg_envs.export import trained_policy


@pytest.fixture(scope="module")
def squat():
    return G1Squat()


def _data_at(env, k, dz=0.0):
    """mjx.Data at reference frame k (pelvis raised by dz), PD targets at that frame."""
    model = env.mj_model
    d = mujoco.MjData(model)
    d.qpos[:] = env.reference.qpos[k]
    d.qpos[2] += dz
    d.qvel[:] = env.reference.qvel[k]
    d.ctrl[:] = env.reference.qpos[k, 7:]
    mujoco.mj_forward(model, d)
    return mjx.put_data(model, d)


def _info(env, step, ref_start=0, **over):
    """Task info after ``step`` control steps (base entries as ``MjxEnv._step`` sets them)."""
    _, _, task = env.initial_state(jax.random.PRNGKey(0))
    info = dict(task, ref_start=np.int32(ref_start), step=np.int32(step), sim_diverged=np.bool_(False))
    info["truncated"] = np.bool_(step >= env.episode_length)
    info.update(over)
    return info


# ----- residual actions and reference-state initialization ------------------------------


def test_residual_action_targets_the_reference(squat):
    env = squat
    assert env.config["residual_actions"] and np.allclose(env.residual_scale, 0.5)
    rng = np.random.default_rng(0)
    for k in (0, 40, len(env.reference) - 2, len(env.reference) + 5):
        info = {"step": np.int32(k), "ref_start": np.int32(0)}
        a = rng.uniform(-1, 1, 29).astype(np.float32)
        absolute = np.asarray(env.physics_action(a, info))
        assert np.all(np.abs(absolute) <= 1.0)  # inside the physics map: nothing clipped twice
        ctrl = np.asarray(env.action_to_ctrl(absolute))
        frame = min(k + 1, len(env.reference) - 1)  # the reference holds its last frame
        assert np.allclose(ctrl, env.reference.qpos[frame, 7:] + 0.5 * a, atol=1e-5)
        # action 0 replays the reference; actions beyond [-1, 1] are clipped
        zero = np.asarray(env.action_to_ctrl(env.physics_action(np.zeros(29), info)))
        assert np.allclose(zero, env.reference.qpos[frame, 7:], atol=1e-5)
        big = env.action_to_ctrl(env.physics_action(3.0 * np.sign(a), info))
        assert np.allclose(big, env.action_to_ctrl(env.physics_action(np.sign(a), info)), atol=1e-6)
    # The observation's last action is the residual, recovered from the PD targets.
    k = 40
    a = rng.uniform(-1, 1, 29).astype(np.float32)
    ctrl = np.asarray(env.action_to_ctrl(env.physics_action(a, {"step": np.int32(k), "ref_start": np.int32(0)})))
    model = env.mj_model
    d = mujoco.MjData(model)
    d.qpos[:] = env.reference.qpos[k + 1]
    d.ctrl[:] = ctrl
    mujoco.mj_forward(model, d)
    after = {"step": np.int32(k + 1), "ref_start": np.int32(0)}
    assert np.allclose(np.asarray(env.last_action(mjx.put_data(model, d), after)), a, atol=1e-4)


def test_absolute_actions_stay_reachable():
    env = G1Squat(config={"residual_actions": False, "random_start": False})
    assert env.residual_scale is None
    info = {"step": np.int32(3), "ref_start": np.int32(0)}
    a = np.full(29, 0.3, np.float32)
    assert np.allclose(np.asarray(env.physics_action(a, info)), a)
    # default pose + scale * action, scale widened so that the clip is reachable
    assert np.max(np.abs((env.reference.joint_pos - env.action_center) / env.action_scale)) < 1.0
    assert int(env.initial_state(jax.random.PRNGKey(5))[2]["ref_start"]) == 0
    with pytest.raises(ValueError, match="residual_actions"):
        G1Squat(config={"residual_actions": 1})
    with pytest.raises(ValueError, match="success_tracking_error"):
        G1Squat(config={"success_tracking_error": 0.0})


def test_random_start_is_the_default_and_varies(squat):
    env = squat
    assert env.config["random_start"]
    # (the start state equals the reference frame: test_tracking's random-start test)
    infos = [env.initial_state(jax.random.PRNGKey(i))[2] for i in range(10)]
    assert len({int(info["ref_start"]) for info in infos}) >= 5
    assert not any(bool(info["fell"]) or float(info["tracking_error"]) != 0.0 for info in infos)


# ----- per-episode metrics and success on hand-built states ---------------------------------


def test_success_needs_the_clip_end_no_fall_and_small_error(squat):
    env = squat
    last = env.episode_length
    k = len(env.reference) - 1
    on_ref = _data_at(env, k)
    # On the reference at the last step, after an episode tracked within 5 cm: success.
    info = env.update_info(on_ref, on_ref, _info(env, last, tracking_error=np.float32(0.05)))
    assert float(info["tracking_error"]) == pytest.approx(0.05 * (last - 1) / last, abs=1e-4)
    assert float(info["joint_error"]) < 1e-3
    assert bool(info["clip_completed"]) and not bool(info["fell"])
    assert bool(env.success(on_ref, info))
    # The same state one step before the end: not yet.
    early = env.update_info(on_ref, on_ref, _info(env, last - 1, ref_start=1))
    assert bool(early["clip_completed"]) and not bool(env.success(on_ref, early))
    # An episode tracked 20 cm off on average: no success.
    off = env.update_info(on_ref, on_ref, _info(env, last, tracking_error=np.float32(0.2)))
    assert float(off["tracking_error"]) > env.config["success_tracking_error"]
    assert not bool(env.success(on_ref, off))
    # A fall earlier in the episode, or one now (pelvis below 0.3 m), or a diverged step.
    for info in (
        _info(env, last, fell=np.bool_(True)),
        _info(env, last, sim_diverged=np.bool_(True)),
    ):
        info = env.update_info(on_ref, on_ref, info)
        assert bool(info["fell"]) and not bool(info["clip_completed"])
        assert not bool(env.success(on_ref, info))
    low = _data_at(env, k, dz=-0.6)
    info = env.update_info(low, low, _info(env, last))
    assert bool(info["fell"]) and not bool(env.success(low, info))


def test_episode_means_accumulate(squat):
    env = squat
    info = _info(env, 0, ref_start=40)
    errors = []
    for step in (1, 2, 3):
        d = _data_at(env, 40)  # stays at frame 40 while the reference moves on
        info = env.update_info(d, d, dict(info, step=np.int32(step)))
        errors.append(float(env.tracking_errors(d, info)["key_body_distance"]))
    assert float(info["tracking_error"]) == pytest.approx(np.mean(errors), rel=1e-4)
    assert 0.0 < float(info["joint_error"]) < 0.1


def test_episode_summary_units(squat):
    finals = {
        "tracking_error": np.array([0.05, 0.15]),
        "joint_error": np.array([0.02, 0.04]),
        "fell": np.array([False, True]),
        "clip_completed": np.array([True, False]),
    }
    assert set(finals) == set(squat.episode_metrics)
    out = episode_summary(finals)
    assert out["tracking_error_cm"] == pytest.approx(10.0) and out["joint_error_rad"] == pytest.approx(0.03)
    assert out["falls"] == 1 and out["completed"] == 1


# ----- escape never pays --------------------------------------------------------------------


def _returns(env, policy_for_episode, seeds):
    out = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        policy = policy_for_episode(obs)
        total = 0.0
        while True:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            total += reward
            if terminated or truncated:
                break
        out.append((total, bool(info["is_success"]), bool(info["fell"]), float(info["tracking_error"])))
    return out


@pytest.mark.integration
@pytest.mark.parametrize("env_id", ["G1Squat-v0", "G1Jump-v0", "G1Kick-v0"])
def test_escape_never_pays(env_id):
    """Over 20 seeds (random start frames), MuJoCo C, absolute actions (the backend maps
    actions directly; returns depend only on the PD targets, so this equals residual mode):
    each escape (all actions +1 or -1: the robot throws itself off the reference and the
    episode ends within a few dozen steps) scores less on average than doing nothing (PD
    targets frozen at the start pose) and never succeeds, and a solution scores more than
    doing nothing and succeeds more often. The solution is the scripted tracker (PD
    targets at the next reference pose) on the squat and the kick; on the jump, where the
    open-loop replay loses balance, the shipped closed-loop policy (``trained_policy``, in
    residual mode as trained)."""
    env = gym.make(f"bcg_envs/{env_id}", backend="mujoco", config={"residual_actions": False})
    jax_env = env.unwrapped.jax_env
    joints = jax_env.observation_layout()["joint_pos"]
    scale = jax_env.action_scale
    seeds = range(20)

    def freeze(obs0):
        a0 = np.clip(obs0[joints] / scale, -1, 1).astype(np.float32)
        return lambda obs: a0

    def constant(value):
        return lambda obs0: lambda obs: np.full(29, value, np.float32)

    escapes = {sign: _returns(env, constant(sign), seeds) for sign in (1.0, -1.0)}
    nothing = _returns(env, freeze, seeds)
    if env_id == "G1Jump-v0":
        residual = gym.make(f"bcg_envs/{env_id}", backend="mujoco")
        policy = trained_policy(env_id)
        solution = _returns(residual, lambda obs0: policy, seeds)
        residual.close()
    else:
        solution = _returns(env, lambda obs0: reference_policy(env), seeds)
    env.close()
    ret = lambda rows: np.array([r[0] for r in rows])  # noqa: E731
    success = lambda rows: np.mean([r[1] for r in rows])  # noqa: E731
    print(
        env_id,
        {f"escape {s:+.0f}": round(ret(v).mean(), 2) for s, v in escapes.items()},
        "nothing",
        round(ret(nothing).mean(), 2),
        success(nothing),
        "solution",
        round(ret(solution).mean(), 2),
        success(solution),
    )
    for rows in escapes.values():
        assert ret(rows).mean() < ret(nothing).mean()
        assert not any(r[1] for r in rows)
    assert ret(nothing).mean() < ret(solution).mean()
    assert success(solution) > success(nothing)
    assert not any(r[2] for r in solution)  # no falls
    if env_id == "G1Squat-v0":
        for rows in escapes.values():
            assert np.all(ret(rows) < ret(nothing))
        assert success(solution) >= 0.7
        assert np.mean([r[3] for r in solution]) < jax_env.config["success_tracking_error"]


def test_hold_pose_policy_in_residual_mode(squat):
    """``hold_pose_policy(env)`` aims at the default pose through the residual (clipped)."""
    env = squat
    obs = np.asarray(env.observe(_data_at(env, 40), {"step": np.int32(40), "ref_start": np.int32(0)}))
    hold = hold_pose_policy(env)(obs)
    assert hold.shape == (29,) and np.all(np.abs(hold) <= 1.0)
    ref1 = obs[env.observation_layout()["ref1_joint_pos"]]
    inside = np.abs(ref1) < 0.5
    assert np.allclose(hold[inside], -ref1[inside] / 0.5, atol=1e-5)
    assert np.all(reference_policy(env)(obs) == 0.0)


@pytest.mark.parametrize("learner", ["sb3_ppo", "shac_exact"])
def test_trained_policy_is_shipped_for_the_jump_only(learner):
    policy = trained_policy("G1Jump-v0", learner)
    assert policy.observation_size == 216 and policy.action_size == 29 and policy.env_id == "G1Jump-v0"
    shipped = r"\['BoxPush-v0', 'G1Jump-v0'\]"  # of the G1 clips, the jump only
    with pytest.raises(FileNotFoundError, match=rf"no shipped {learner} policy for 'G1Squat-v0'; shipped: {shipped}"):
        trained_policy("G1Squat-v0", learner)


def test_format_row_reports_success_with_its_interval():
    r = dict(
        episodes=4,
        mean_return=1.0,
        mean_length=2.0,
        success=np.array([True, False, False, False]),
        mean_tracking_error_cm=3.0,
        mean_joint_error_rad=0.1,
        falls=1,
        completed_episodes=2,
    )
    assert "25.0 % [4.6, 69.9]" in format_row("G1Jump-v0", "trained", r)


def test_trained_policy_names_the_learners():
    with pytest.raises(ValueError, match=r"learner must be one of \['sb3_ppo', 'shac_exact'\], got 'ppo'"):
        trained_policy("G1Jump-v0", "ppo")
