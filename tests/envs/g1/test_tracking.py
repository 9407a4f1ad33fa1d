"""Tests of the G1 tracking envs (bcg_envs/envs/g1/tracking.py) and the sim-to-sim check.

Compiling a G1 step is the cost of this file, so one Gymnasium G1Squat-v0 env (one jitted
reset/step and one jitted grad_step per estimator) is shared by every test that steps;
the other ids are only constructed (no compile) outside the integration tier.
"""

import gymnasium as gym
import jax
import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import bcg_envs
from bcg_envs import BundleConfig
from bcg_envs.envs.g1 import constants as C
from bcg_envs.envs.g1 import motions
from bcg_envs.envs.g1.base import ReferenceMotion, max_deviation_from_default
from bcg_envs.envs.g1.scripted import hold_pose_policy, reference_policy
from bcg_envs.envs.g1.tracking import G1Squat, G1Track
from bcg_envs.sim2sim import format_sim_to_sim, sim_to_sim

long = pytest.mark.long  # minutes of G1 compile: the long tier

G1_IDS = ["G1Jump-v0", "G1Squat-v0", "G1Kick-v0", "G1Track-v0"]
NOBS = 97 + 3 * 39 + 2
LAST_ACTION = slice(68, 97)  # observation slice of the last action


def _stand_qpos(height=None):
    qpos = np.zeros(36)
    qpos[2] = C.DEFAULT_ROOT_HEIGHT if height is None else height
    qpos[3] = 1.0
    qpos[7:] = C.DEFAULT_POSE
    return qpos


@pytest.fixture(scope="module")
def squat():
    return G1Squat()


@pytest.fixture(scope="module")
def gym_env():
    """Default config (residual actions) but a fixed start: the squat clip's first 12
    frames are the default pose, so action 0 holds it during the drop tests."""
    env = gym.make("bcg_envs/G1Squat-v0", config={"random_start": False})
    yield env
    env.close()


# ----- construction only (no compile) ---------------------------------------------------


@pytest.mark.parametrize("env_id", G1_IDS)
def test_ids_construct_with_paper_defaults(env_id):
    env = bcg_envs.make_jax(env_id)
    assert env.observation_size == NOBS
    layout = env.observation_layout()
    assert layout["last_action"] == LAST_ACTION and layout["phase"] == slice(NOBS - 2, NOBS)
    assert env.action_size == 29
    assert env.dt == pytest.approx(0.02)
    assert env.physics.n_substeps == 5
    assert env.episode_length == len(env.reference) - 1
    assert env.bundle.force_threshold == 400.0
    assert env.bundle.horizon == 2 and env.stepper().num_samples == 10
    assert env.bundle.space == "cartesian" and env.bundle.state_sigma == (0.01, 0.02)
    assert np.allclose(env.mj_model.pair_solref[:, 0], 0.008)
    # Every reference pose is reachable with |action| < 1 (PD targets, default scaling).
    ref = env.reference.joint_pos
    a = (ref - env.action_center) / env.action_scale
    assert np.max(np.abs(a)) < 1.0
    assert np.all(env.action_scale >= 0.5)


def test_user_bundle_is_kept():
    env = G1Squat(bundle=BundleConfig(horizon=1, num_samples=4))
    assert env.bundle.horizon == 1 and env.bundle.num_samples == 4
    assert env.bundle.force_threshold == 400.0


def test_reference_is_sampled_at_the_control_rate(squat):
    env = squat
    clip = motions.load_clip("squat")
    ref = env.reference
    assert len(ref) == int(np.floor(clip.duration / 0.02 + 1e-9)) + 1
    # Frame k is the clip at t = 0.02 k (interpolated between 30 fps frames).
    for k in (0, 7, 50, len(ref) - 1):
        assert np.allclose(ref.qpos[k], clip.qpos_at(0.02 * k), atol=1e-9)
    # Finite differences of the sampled joint angles agree with the reference velocities.
    fd = np.gradient(ref.joint_pos, 0.02, axis=0)
    assert np.max(np.abs(fd[2:-2] - ref.qvel[2:-2, 6:])) < 0.25
    # Root height dips in the squat; feet stay in contact throughout.
    assert ref.qpos[:, 2].min() < 0.55
    assert np.all(ref.foot_contact == 1.0)
    # Key bodies by forward kinematics: the foot sites are at the floor at the start.
    feet = [C.KEY_SITES.index(s) for s in C.FEET_SITES]
    assert np.all(np.abs(ref.key_pos[0, feet, 2]) < 0.01)


def test_jump_reference_has_flight():
    ref = ReferenceMotion.from_clip(motions.load_clip("jump"), 0.02)
    flight = ref.foot_contact.sum(axis=1) == 0
    assert 3 <= flight.sum() <= 25


def test_track_motion_file_equals_squat(tmp_path, squat):
    track = G1Track(motion_file=motions.clip_path("squat"))
    for field in ("qpos", "qvel", "key_pos", "foot_contact"):
        assert np.array_equal(getattr(track.reference, field), getattr(squat.reference, field)), field
    assert np.array_equal(track.action_scale, squat.action_scale)
    assert track.episode_length == squat.episode_length
    # A user CSV (a copy of the clip, via the loader/writer) gives the same reference.
    path = motions.save_csv(motions.load_clip("squat"), tmp_path / "mine.csv")
    mine = bcg_envs.make_jax("G1Track-v0", motion_file=str(path))
    assert np.allclose(mine.reference.qpos, squat.reference.qpos, atol=1e-8)
    # gym.make forwards motion_file to G1Track.
    genv = gym.make("bcg_envs/G1Track-v0", motion_file=path)
    assert np.allclose(genv.unwrapped.jax_env.reference.qpos, squat.reference.qpos, atol=1e-8)


def _reference_data(env, k):
    """mjx.Data (via MuJoCo C kinematics) at reference frame k, moving as the reference."""
    from mujoco import mjx

    model = env.mj_model
    d = mujoco.MjData(model)
    d.qpos[:] = env.reference.qpos[k]
    d.qvel[:] = env.reference.qvel[k]
    d.ctrl[:] = env.reference.qpos[k, 7:]  # residual action 0 of the step into frame k
    mujoco.mj_forward(model, d)
    return mjx.put_data(model, d)


@pytest.mark.integration
def test_observation_and_reward_on_the_reference(squat):
    """Eager (no compile): at the reference state every tracking term is ~1."""
    env = squat
    k = 40  # mid squat
    data = _reference_data(env, k)
    info = {"step": np.int32(k), "ref_start": np.int32(0)}
    obs = np.asarray(env.observe(data, info))
    layout = env.observation_layout()
    ref = env.reference
    assert obs.shape == (NOBS,)
    assert obs[layout["base_height"]][0] == pytest.approx(ref.qpos[k, 2], abs=1e-6)
    g = obs[layout["gravity"]]
    assert np.linalg.norm(g) == pytest.approx(1.0, abs=1e-5) and g[2] < -0.9
    assert np.allclose(obs[layout["joint_pos"]], ref.qpos[k, 7:] - C.DEFAULT_POSE, atol=1e-5)
    assert np.allclose(obs[layout["joint_vel"]], ref.qvel[k, 6:], atol=1e-5)
    assert np.allclose(obs[layout["last_action"]], 0.0, atol=1e-5)
    for j in (1, 2, 3):
        assert np.allclose(obs[layout[f"ref{j}_joint_pos"]], ref.qpos[k + j, 7:] - C.DEFAULT_POSE, atol=1e-5)
        assert obs[layout[f"ref{j}_base_height"]][0] == pytest.approx(ref.qpos[k + j, 2], abs=1e-6)
        # Small motion ahead: nearly the identity rotation, a small position offset.
        assert np.allclose(obs[layout[f"ref{j}_orientation"]], [1, 0, 0, 0, 1, 0], atol=0.1)
        assert np.linalg.norm(obs[layout[f"ref{j}_position"]]) < 0.05 * j
    phase = 2 * np.pi * k / (len(ref) - 1)
    assert np.allclose(obs[layout["phase"]], [np.sin(phase), np.cos(phase)], atol=1e-5)
    terms = env.reward_terms(data, np.zeros(29), data, info)
    for name in ("joint_pos", "joint_vel", "root_pos", "root_orient", "key_body"):
        assert float(terms[name]) == pytest.approx(1.0, abs=1e-4), name
    assert not bool(env.terminated(data, info))
    # Off the reference (a frame later in time), the terms drop.
    later = {"step": np.int32(k + 10), "ref_start": np.int32(0)}
    assert float(env.reward_terms(data, np.zeros(29), data, later)["joint_pos"]) < 0.9


@pytest.mark.integration
def test_random_start_and_reset_push():
    """``initial_state`` is plain JAX (no MJX): checked eagerly."""
    env = G1Squat(config={"random_start": True, "domain_randomization": True})
    starts = set()
    for i in range(8):
        qpos, qvel, info = env.initial_state(jax.random.PRNGKey(i))
        k = int(info["ref_start"])
        starts.add(k)
        assert 0 <= k < len(env.reference) - 1
        assert np.allclose(np.asarray(qpos), env.reference.qpos[k], atol=1e-6)
        push = np.asarray(qvel)[:2] - env.reference.qvel[k, :2]
        assert np.all(np.abs(push) <= 0.5 + 1e-6) and np.any(push != 0.0)
        assert np.allclose(np.asarray(qvel)[2:], env.reference.qvel[k, 2:], atol=1e-6)
    assert len(starts) > 1


def test_bad_motion_file_is_reported(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("1,2,3\n")
    with pytest.raises(ValueError, match="line 1"):
        G1Track(motion_file=path)


def test_bad_config_is_reported():
    with pytest.raises(ValueError, match="action_scale"):
        G1Squat(config={"action_scale": 0.0})
    with pytest.raises(ValueError, match="unknown key"):
        G1Squat(config={"no_such_key": 1})


@pytest.mark.integration
def test_domain_randomization_changes_the_model(squat):
    nominal = squat.mj_model
    env = G1Squat(config={"domain_randomization": True, "randomization": {"seed": 3}})
    m = env.mj_model
    pelvis = m.body(C.ROOT_BODY).id
    ratio = m.body_mass[1:] / nominal.body_mass[1:]
    others = np.arange(1, m.nbody) != pelvis
    assert np.all((ratio[others] >= 0.8 - 1e-9) & (ratio[others] <= 1.2 + 1e-9))
    assert not np.allclose(ratio, 1.0)
    assert abs(m.body_mass[pelvis] - nominal.body_mass[pelvis]) <= 3.0 * 1.2 + 1.0
    foot_pairs = [i for i in range(m.npair) if m.pair_dim[i] == 3]
    mu = m.pair_friction[foot_pairs, 0]
    assert np.all(mu == mu[0]) and 0.3 <= mu[0] <= 1.2
    kp = m.actuator_gainprm[:, 0] / nominal.actuator_gainprm[:, 0]
    assert np.all((kp >= 0.8) & (kp <= 1.2))
    assert np.allclose(m.actuator_biasprm[:, 1], -m.actuator_gainprm[:, 0])
    # Deterministic in the seed; off by default.
    again = G1Squat(config={"domain_randomization": True, "randomization": {"seed": 3}}).mj_model
    assert np.array_equal(again.body_mass, m.body_mass)
    assert not squat.config["domain_randomization"]


# ----- one compiled G1Squat env -----------------------------------------------------------


@pytest.mark.integration
def test_check_env_squat(gym_env):
    check_env(gym_env.unwrapped, skip_render_check=True)


@pytest.mark.integration
def test_50_steps_without_nan(gym_env):
    env = gym_env.unwrapped
    obs, info = env.reset(seed=1)
    assert obs.shape == (NOBS,) and np.all(np.isfinite(obs))
    # Starts at the reference's first frame, at rest on the floor.
    qpos, qvel, _ = env.get_state()
    assert np.allclose(qpos, env.jax_env.reference.qpos[0], atol=1e-5)
    assert np.allclose(obs[LAST_ACTION], 0.0)
    rng = np.random.default_rng(0)
    rewards = []
    for t in range(50):
        action = 0.1 * rng.uniform(-1, 1, 29).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        assert np.all(np.isfinite(obs)) and np.isfinite(reward)
        assert not info["sim_diverged"]
        # The last action is recovered from the PD targets.
        assert np.allclose(obs[LAST_ACTION], action, atol=1e-4)
        rewards.append(reward)
        for k in ("joint_pos", "joint_vel", "root_pos", "root_orient", "key_body", "foot_contact"):
            assert 0.0 <= info[f"reward/{k}"] <= 1.0 + 1e-6
        assert not truncated
        if terminated:
            obs, info = env.reset(seed=2)
    assert 0.0 < np.mean(rewards) <= 1.0


@pytest.fixture(scope="module")
def set_state(gym_env):
    """Set the Gym env's state through one jitted ``state_from``.

    ``GymEnv.set_state`` runs MJX ``forward`` op by op (about 60 s for the first call and
    6 s for each later one on 2 cores); a jitted equivalent compiles once.
    """
    env = gym_env.unwrapped
    make = jax.jit(lambda qpos, qvel, info, rng: env.jax_env.state_from(qpos, qvel, None, info, rng))

    def set_(qpos, qvel):
        old = env.simulation.state
        info = {k: v for k, v in old.info.items() if k != "rng"}
        env.simulation.state = make(np.asarray(qpos, np.float32), np.asarray(qvel, np.float32), info, old.info["rng"])

    return set_


def _drop(set_state, height, vz):
    qvel = np.zeros(35)
    qvel[2] = vz
    set_state(_stand_qpos(height), qvel)


DROP = (C.DEFAULT_ROOT_HEIGHT + 0.015, -0.6)  # 1.5 cm above standing height, 0.6 m/s down


def _check_bundle_pattern(bundled, forces):
    """Bundled exactly when a contact presses above 400 N, or in the step after (H = 2)."""
    assert max(forces) > 400.0, forces
    for t, (b, f) in enumerate(zip(bundled, forces)):
        expected = f > 400.0 or (t > 0 and forces[t - 1] > 400.0)
        assert b == expected, (t, bundled, forces)


@pytest.mark.integration
def test_bcg_bundles_at_foot_impact_not_in_flight(gym_env, set_state):
    """The env's default estimator is bcg: ``step`` reports whether it bundles.

    (``grad_step(..., estimator="bcg")`` reports the same flag from the same forward pass;
    it is checked in the integration test below: its compile alone takes ~4 minutes here.)
    """
    env = gym_env.unwrapped
    assert env.jax_env.estimator == "bcg"
    env.reset(seed=0)
    zero = np.zeros(29, np.float32)
    # Held high above the floor: no contact, no bundle.
    _drop(set_state, 2.0, 0.0)
    for _ in range(3):
        *_, info = env.step(zero)
        assert not info["bundled"] and info["max_contact_force"] == 0.0
    # Dropped from 1.5 cm: the feet hit the floor at more than 400 N in the second step,
    # then settle below it.
    _drop(set_state, *DROP)
    bundled, forces = [], []
    for _ in range(5):
        *_, info = env.step(zero)
        bundled.append(bool(info["bundled"]))
        forces.append(float(info["max_contact_force"]))
    _check_bundle_pattern(bundled, forces)
    assert bundled[0] is False and bundled[-1] is False and any(bundled)
    assert forces[0] == 0.0 and forces[-1] < 400.0, forces


@pytest.mark.integration
@long
def test_bcg_grad_step_bundles_at_foot_impact_not_in_flight(gym_env, set_state):
    env = gym_env.unwrapped
    env.reset(seed=0)
    zero = np.zeros(29, np.float32)
    _drop(set_state, 2.0, 0.0)
    out = env.grad_step(zero, estimator="bcg")
    assert not out.info["bundled"] and out.info["max_contact_force"] == 0.0
    _drop(set_state, *DROP)
    bundled, forces = [], []
    for _ in range(3):
        out = env.grad_step(zero, estimator="bcg")
        bundled.append(bool(out.info["bundled"]))
        forces.append(float(out.info["max_contact_force"]))
        assert out.jacobians.A.shape == (70, 70) and out.jacobians.B.shape == (70, 29)
        assert np.all(np.isfinite(out.jacobians.A)) and np.all(np.isfinite(out.jacobians.B))
        assert out.info["bundle_dropped"] == 0
    _check_bundle_pattern(bundled, forces)
    assert bundled == [False, True, True], (bundled, forces)


# Columns checked: A for joint positions (left knee, right hip pitch, waist yaw) and the
# pelvis rotation about x (tangent space), B for two actuators.
A_COLUMNS = ["left_knee_joint", "right_hip_pitch_joint", "waist_yaw_joint", "root_rot_x"]
B_COLUMNS = ["left_knee", "left_shoulder_pitch"]


def _c_step(model, qpos, qvel, ctrl, substeps):
    d = mujoco.MjData(model)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    for _ in range(substeps):
        mujoco.mj_step(model, d)
    return d.qpos.copy(), d.qvel.copy()


def _c_tangent(model, qpos, qvel, qpos_ref, qvel_ref):
    dq = np.zeros(model.nv)
    mujoco.mj_differentiatePos(model, dq, 1.0, qpos_ref, qpos)
    return np.concatenate([dq, qvel - qvel_ref])


@pytest.mark.integration
@pytest.mark.parametrize(
    "route",
    [
        "stepper",  # the estimator's (A, B), as grad_step computes them (one ~95 s compile)
        pytest.param("grad_step", marks=long),  # the public path (~175 s compile)
    ],
)
def test_exact_jacobian_columns_match_mujoco_finite_differences(gym_env, set_state, route):
    """Flight (no contact), joints moving away from limits: exact A/B columns vs C FD."""
    env = gym_env.unwrapped
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    qpos = _stand_qpos(1.5)
    qpos[7:] += 0.05 * rng.standard_normal(29)
    qpos[3:7] = [np.cos(0.05), np.sin(0.05), 0.0, 0.0]
    qvel = 0.5 * rng.standard_normal(35)
    set_state(qpos, qvel)
    qpos, qvel, _ = env.get_state()  # float32-rounded state, as simulated
    qpos, qvel = qpos.astype(np.float64), qvel.astype(np.float64)
    jax_env = env.jax_env
    # PD offsets from the default pose that move the joints away from their limits; the
    # action realizing them depends on the action map.
    offsets = 0.2 * rng.uniform(-1, 1, 29) * np.maximum(0.5, 1.25 * max_deviation_from_default(jax_env.reference))
    info0 = dict(env.simulation.state.info)
    if route == "grad_step":  # the residual action: PD targets around the reference pose
        target = np.asarray(jax_env.reference_target(info0), np.float64)
        per_unit = np.asarray(jax_env.residual_scale, np.float64)
    else:  # the stepper's absolute action
        target, per_unit = np.asarray(jax_env.action_center, np.float64), np.asarray(jax_env.action_scale, np.float64)
    action = ((jax_env.action_center + offsets - target) / per_unit).astype(np.float32)
    assert np.all(np.abs(action) < 1.0)
    if route == "grad_step":
        out = env.grad_step(action, estimator="exact")
        assert not out.info["bundled"] and out.info["max_contact_force"] == 0.0
        A, B = out.jacobians.A, out.jacobians.B
        mjx_next = env.get_state()[:2]
    else:
        state = env.simulation.state
        stepper = env.jax_env.stepper("exact")
        (nxt, contact, _), (A, B), _ = stepper.jacobians(
            state.data, np.asarray(action), state.info["rng"], state.info["bundle_window"]
        )
        assert float(np.max(contact[0])) == 0.0
        A, B = np.asarray(A), np.asarray(B)
        mjx_next = np.asarray(nxt.qpos), np.asarray(nxt.qvel)
    model = env.model
    ctrl = target + per_unit * action.astype(np.float64)
    n = jax_env.physics.n_substeps
    nv = model.nv

    def step_x(dx, du):
        q = qpos.copy()
        mujoco.mj_integratePos(model, q, dx[:nv], 1.0)
        return _c_step(model, q, qvel + dx[nv:], ctrl + per_unit * du, n)

    q0, v0 = step_x(np.zeros(2 * nv), np.zeros(29))
    # The MJX step matches MuJoCo C here.
    assert np.allclose(mjx_next[0], q0, atol=2e-4) and np.allclose(mjx_next[1], v0, atol=2e-2)

    def column(dx=None, du=None, eps=1e-4):
        dx = np.zeros(2 * nv) if dx is None else dx
        du = np.zeros(29) if du is None else du
        plus = _c_tangent(model, *step_x(eps * dx, eps * du), q0, v0)
        minus = _c_tangent(model, *step_x(-eps * dx, -eps * du), q0, v0)
        return (plus - minus) / (2 * eps)

    errors = {}
    for name in A_COLUMNS:
        dof = 3 if name == "root_rot_x" else model.jnt_dofadr[model.joint(name).id]
        e = np.zeros(2 * nv)
        e[dof] = 1.0
        fd = column(dx=e)
        err = np.linalg.norm(A[:, dof] - fd) / np.linalg.norm(fd)
        errors[name] = err
        assert np.linalg.norm(fd) > 0.5 and err < 1e-3, (name, err)
    for name in B_COLUMNS:
        u = model.actuator(name).id
        e = np.zeros(29)
        e[u] = 1.0
        fd = column(du=e)
        err = np.linalg.norm(B[:, u] - fd) / np.linalg.norm(fd)
        errors[name] = err
        assert np.linalg.norm(fd) > 1e-3 and err < 1e-3, (name, err)
    print("relative column errors vs MuJoCo C central differences:", errors)


@pytest.mark.integration
def test_sim_to_sim_reference_replay_on_squat(gym_env):
    """The scripted tracker (residual action 0: PD targets at the next reference pose)
    squats in both simulators and is scored a success by both."""
    result = sim_to_sim(gym_env, reference_policy(gym_env), episodes=1, seed=0)
    print("sim_to_sim(G1Squat-v0, reference replay):\n" + format_sim_to_sim(result))
    assert result["episodes"] == 1 and len(result["per_episode"]) == 1
    assert result["obs_reset_max_abs_diff"] < 1e-4
    horizon = gym_env.unwrapped.jax_env.episode_length
    assert result["falls"] == 0 and result["falls_mjx"] == 0
    assert result["completed"] == 1 and result["completed_mjx"] == 1
    assert result["steps"] == [horizon] and result["steps_mjx"] == [horizon]
    # It squats: the key bodies stay within centimetres of the reference.
    assert 1.0 < result["tracking_error_cm"] < 10.0 and 1.0 < result["tracking_error_cm_mjx"] < 10.0
    assert abs(result["tracking_error_cm"] - result["tracking_error_cm_mjx"]) < 2.0
    assert result["joint_error_rad"] < 0.06 and result["joint_error_rad_mjx"] < 0.06
    assert result["success_rate"] == 1.0 and result["success_rate_mjx"] == 1.0
    for k in ("penetration_mm", "penetration_mm_mjx"):
        assert 0.0 <= result[k] < 10.0
    assert abs(result["penetration_diff_mm"]) < 2.0


@pytest.mark.integration
def test_sim_to_sim_rejects_bad_arguments(gym_env):
    with pytest.raises(ValueError, match="episodes"):
        sim_to_sim(gym_env, hold_pose_policy(), episodes=0)
    with pytest.raises(ValueError, match="shape"):
        sim_to_sim(gym_env, lambda obs: np.zeros(3), episodes=1, max_steps=1)


def test_sim_to_sim_needs_a_mujoco_contact_env_for_a_kappa_trained_policy(squat):
    """MuJoCo C cannot simulate the kappa models: their transfer names its MuJoCo C env,
    which must be the same task under MuJoCo's contact."""
    moreau = G1Squat(contact_model="moreau")
    with pytest.raises(ValueError, match="mujoco_env=make_jax"):
        sim_to_sim(moreau, hold_pose_policy(), episodes=1)
    with pytest.raises(ValueError, match="mujoco_env=make_jax"):
        sim_to_sim(squat, hold_pose_policy(), episodes=1, mujoco_env=moreau)
    with pytest.raises(ValueError, match="must be a G1Squat JAX env"):
        sim_to_sim(moreau, hold_pose_policy(), episodes=1, mujoco_env=G1Track())
    with pytest.raises(ValueError, match="episode length"):
        sim_to_sim(moreau, hold_pose_policy(), episodes=1, mujoco_env=G1Squat(config={"episode_length": 7}))


@pytest.mark.integration
@long
def test_sim_to_sim_from_moreau_to_mujoco_contact(squat):
    """A Moreau-trained policy transfers to MuJoCo C under MuJoCo's contact: both sides
    start from the same state and step at their own physics steps."""
    moreau = G1Squat(config={"random_start": False}, contact_model="moreau")
    assert moreau.physics.mj_model.opt.timestep != squat.physics.mj_model.opt.timestep
    mujoco_env = G1Squat(config={"random_start": False})
    result = sim_to_sim(moreau, hold_pose_policy(), episodes=1, max_steps=5, mujoco_env=mujoco_env)
    assert result["obs_reset_max_abs_diff"] < 1e-4
    assert result["steps"] == [5] and result["steps_mjx"] == [5]
    assert result["falls"] == 0 and result["falls_mjx"] == 0
    assert np.isfinite(result["tracking_error_cm"]) and np.isfinite(result["tracking_error_cm_mjx"])


# ----- the other ids (one compile each) ------------------------------------------------------


@pytest.mark.integration
@long
@pytest.mark.parametrize("env_id", ["G1Jump-v0", "G1Kick-v0", "G1Track-v0"])
def test_check_env_other_ids(env_id):
    env = gym.make(f"bcg_envs/{env_id}")
    check_env(env.unwrapped, skip_render_check=True)
    env.reset(seed=0)
    for _ in range(20):
        obs, reward, *_ = env.step(np.zeros(29, np.float32))
        assert np.all(np.isfinite(obs)) and np.isfinite(reward)
    env.close()
