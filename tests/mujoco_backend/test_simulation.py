"""bcg_envs/mujoco_backend/simulation.py: MuJoCo C stepping against MJX (per step and over
a trajectory), the step-info contract with truncation, the state round trip, and divergence
handling."""

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)
from bcg_envs.gym import GradStepResult, GymEnv
from tests.mujoco_backend.conftest import ENV_ID, TASKS, smooth_action


def _regime(model, qpos, qvel, ctrl, n_substeps):
    """Per substep (MuJoCo C): the contacting geom pairs, and each dry-friction joint's
    direction while it slides (0 while it sticks): what switches when a contact opens or
    closes or a joint starts, stops or reverses."""
    d = mujoco.MjData(model)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    pattern = []
    for _ in range(n_substeps):
        mujoco.mj_step(model, d)
        n = d.nefc
        friction = d.efc_type[:n] == mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF
        force = d.efc_force[:n][friction]
        sliding = np.abs(force) >= 0.999 * d.efc_frictionloss[:n][friction]
        pattern.append((tuple(sorted(map(tuple, d.contact.geom[: d.ncon]))), tuple(np.sign(force) * sliding)))
    return pattern


#: Smooth-action amplitude per task (G1 holds its default pose: with any PD offset one of its
#: 29 dry-friction joints switches stick/slip in nearly every step).
AMPLITUDE = {"BoxPush-v0": 1.0, "PlanarHand-v0": 1.0, "G1Squat-v0": 0.0}
#: Per-step tolerance (absolute and relative) on observations and reward: float32 MJX vs
#: float64 C over one control step (and MJX's warmstart vs C's cold start after
#: set_state). Measured worst: BoxPush 6e-6, PlanarHand 4e-4 (finger velocities in
#: contact), G1 7e-3 (joint velocities: stiff PD servos on 8 stiff foot contacts amplify
#: the rounding).
STEP_TOL = {"BoxPush-v0": 1e-3, "PlanarHand-v0": 1e-3, "G1Squat-v0": 2e-2}


@pytest.mark.integration
@pytest.mark.parametrize("name", TASKS)
def test_per_step_agreement_with_mjx(name):
    """Both backends reset with the same seed (same state and task info); before every
    step of a 100-step smooth-action run the C env is set to the MJX env's (float32)
    state, so each step starts from the same state. Where no constraint switches regime
    within the step (contact on/off, dry-friction stick/slip: the dynamics jump there, and
    MJX and C resolve slow dry-friction sliding differently: C's box yaw chatters where
    MJX sticks), one control step agrees to ``STEP_TOL`` on every observation and the
    reward, contact steps included; so do the contact forces, events' and single contacts'
    (1e-2 relative)."""
    c = gym.make(f"bcg_envs/{name}", backend="mujoco")
    m = gym.make(f"bcg_envs/{name}")  # the MJX env (its jitted step is shared with tests/envs)
    u = c.unwrapped
    model, n_sub = u.model, u.jax_env.physics.n_substeps
    oc, _ = c.reset(seed=3)
    om, _ = m.reset(seed=3)
    np.testing.assert_allclose(oc, om, atol=1e-6)
    nu = c.action_space.shape[0]
    worst, worst_force, checked, contact_steps = 0.0, 0.0, 0, 0
    for t in range(100):
        qpos, qvel, _ = m.unwrapped.get_state()
        u.set_state(qpos, qvel)
        a = smooth_action(t, nu, amp=AMPLITUDE[name])
        if name == "BoxPush-v0":  # steer the pusher at the box, so that many steps are in contact
            a = np.clip(0.5 * a + 0.6 * om[13:15] / (np.linalg.norm(om[13:15]) + 1e-6), -1, 1).astype(np.float32)
        ctrl = u.simulation.task.action_map(u.simulation.task.physics_action(np.clip(a, -1, 1), u.simulation.core.info))
        pattern = _regime(model, qpos, qvel, ctrl, n_sub)
        obs, reward, term, trunc, info = c.step(a)
        om, rm, tm, _, im = m.step(a)
        if term or tm:
            break
        if len(set(pattern)) > 1:
            continue  # a regime switch inside the step
        for key in ("max_contact_force", "max_point_force"):  # an event's summed force, a contact's own
            worst_force = max(worst_force, abs(info[key] - im[key]) / max(im[key], 1.0))
        assert info["max_point_force"] <= info["max_contact_force"] + 1e-9, t
        worst = max(worst, float(np.max(np.abs(obs - om))))
        tol = STEP_TOL[name]
        np.testing.assert_allclose(obs, om, atol=tol, rtol=tol, err_msg=f"step {t}")
        assert reward == pytest.approx(rm, abs=tol, rel=tol), t
        checked += 1
        contact_steps += bool(pattern[0][0])
    print(
        f"{name}: {checked} steps checked ({contact_steps} in contact), worst obs difference {worst:.2e}, "
        f"worst relative contact force difference {worst_force:.2e}"
    )
    # G1 starts at a random clip frame and replays the reference open loop (action 0),
    # which the tracking-error limit can end after ~30 steps.
    assert checked >= (20 if name.startswith("G1") else 30) and contact_steps > 0 and worst_force < 1e-2
    c.close()
    m.close()


def test_trajectory_agreement_with_mjx():
    """100 steps from the same reset (same seed: same state and goal), both backends fed
    the same smooth action sequence (a proportional pursuit of the box, computed from the C
    observation, so the pusher strikes and pushes it). Float32 MJX and float64 C drift
    apart through the stiff contact and C's dry-friction chatter (see the per-step test):
    positions stay within 1 cm and observations within 0.1 over the 4 s."""
    c = gym.make(ENV_ID, backend="mujoco")
    m = gym.make(ENV_ID)
    oc, _ = c.reset(seed=7)
    om, _ = m.reset(seed=7)
    np.testing.assert_array_equal(oc, om)
    forces, worst, worst_q = [], 0.0, 0.0
    for t in range(100):
        a = np.clip(6.0 * oc[13:15], -0.8, 0.8).astype(np.float32)
        oc, rc, tc, _, ic = c.step(a)
        om, rm, tm, _, im = m.step(a)
        forces.append(ic["max_contact_force"])
        worst = max(worst, float(np.max(np.abs(oc - om))))
        worst_q = max(worst_q, float(np.max(np.abs(c.unwrapped.get_state()[0] - m.unwrapped.get_state()[0]))))
        assert tc == tm
        if tc:
            break
    print(
        f"trajectory: worst obs difference {worst:.2e}, worst qpos difference {worst_q:.2e}, "
        f"{sum(f > 0 for f in forces)} steps in contact, max force {max(forces):.1f} N"
    )
    assert worst_q < 1e-2 and worst < 0.1
    assert sum(f > 0 for f in forces) >= 5  # the run exercises contact
    c.close()
    m.close()


def test_step_info_truncation_and_state_round_trip():
    e = gym.make(ENV_ID, backend="mujoco", config={"episode_length": 5})
    m = gym.make(ENV_ID)
    _, info_c = e.reset(seed=0)
    _, info_m = m.reset(seed=0)
    assert set(info_c) == set(info_m)
    _, _, _, _, info_m = m.step(np.zeros(2, np.float32))
    for t in range(5):
        _, r, term, trunc, info_c = e.step(np.zeros(2, np.float32))
        assert set(info_c) == set(info_m)
        assert info_c["step"] == t + 1 and trunc == (t == 4) and not term
    for k, v in info_c.items():
        assert np.asarray(v).dtype.kind == np.asarray(info_m[k]).dtype.kind, k
    u = e.unwrapped
    qpos, qvel = np.array([0.2, -0.1, 0.0, 0.05, 0.3]), np.array([0.1, 0.0, -0.2, 0.0, 0.5])
    u.set_state(qpos, qvel)
    q, v, act = u.get_state()
    np.testing.assert_array_equal(q, qpos)
    np.testing.assert_array_equal(v, qvel)
    assert act.shape == (0,) and u.get_state()[0] is not u.data.qpos  # copies
    e.close()
    m.close()


@pytest.mark.parametrize("qvel_scale", [2e3, 1e11], ids=["fast", "huge"])
def test_divergence_reverts_the_step(qvel_scale):
    """|qvel| >= 1e3 after the step (fast) or a state MuJoCo itself rejects and resets
    (huge): the step is reverted, terminated, flagged, with a finite observation."""
    e = GymEnv("BoxPush-v0", backend="mujoco")
    e.reset(seed=0)
    # The box (no joint limit, light damping) thrown away from the pusher.
    qpos, qvel = np.array([-0.3, -0.3, 0.2, 0.2, 0.0]), np.array([0.0, 0.0, qvel_scale, 0.0, 0.0])
    e.set_state(qpos, qvel)
    for fn in (e.step, lambda a: e.grad_step(a, estimator="exact")):
        e.set_state(qpos, qvel)
        out = fn(np.zeros(2, np.float32))
        obs, reward, term, trunc, info = out[:5]
        assert info["sim_diverged"] and term and reward == 0.0 and info["is_success"] is False
        assert np.isfinite(obs).all()
        np.testing.assert_array_equal(e.get_state()[0], qpos)  # reverted
        if isinstance(out, GradStepResult):
            assert all(np.all(j == 0) for j in out.jacobians)
    e.close()
