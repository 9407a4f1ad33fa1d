"""BoxPush-v0: Gymnasium contract, Jacobians against MuJoCo C, BCG behaviour."""

import gymnasium as gym
import jax
import mujoco
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)

ENV_ID = "bcg_envs/BoxPush-v0"


@pytest.fixture(scope="module")
def env():
    e = gym.make(ENV_ID)
    e.reset(seed=0)
    yield e
    e.close()


def test_gymnasium_check_env(no_space_warnings):
    from gymnasium.utils.env_checker import check_env

    e = gym.make(ENV_ID, render_mode="rgb_array")
    with no_space_warnings():
        check_env(e.unwrapped)
    e.close()


def test_sb3_check_env(no_space_warnings):
    from stable_baselines3.common.env_checker import check_env

    e = gym.make(ENV_ID)
    with no_space_warnings():
        check_env(e)
    e.close()


@pytest.mark.parametrize("spread", [0.5, np.pi])
def test_reset_places_the_pusher_behind_the_box_and_draws_goal_distance_independently(spread):
    task = bcg_envs.make_jax("BoxPush-v0", config={"pusher_angle_spread": spread})
    qpos, _, info = jax.vmap(task.initial_state)(jax.random.split(jax.random.PRNGKey(0), 1000))
    qpos, goal = np.asarray(qpos), np.asarray(info["goal"])
    to_goal, to_pusher = goal - qpos[:, 2:4], qpos[:, 0:2] - qpos[:, 2:4]
    cos = np.sum(to_goal * to_pusher, 1) / np.linalg.norm(to_goal, axis=1) / np.linalg.norm(to_pusher, axis=1)
    # Pusher on the far side of the box: the angle between box->goal and box->pusher is
    # within `spread` of pi; a spread of pi covers the whole circle.
    assert cos.max() <= np.cos(np.pi - spread) + 1e-4
    assert cos.min() < -0.99 and (spread < np.pi or cos.max() > 0.99)
    # Goal direction and distance are drawn from different keys (they once shared one).
    unclipped = np.all(np.abs(goal) < 0.399, axis=1)
    direction = np.arctan2(to_goal[unclipped, 1], to_goal[unclipped, 0])
    distance = np.linalg.norm(to_goal[unclipped], axis=1)
    assert abs(np.corrcoef(direction, distance)[0, 1]) < 0.15


# ----- MuJoCo C reference ---------------------------------------------------------------
def c_step(model, qpos, qvel, ctrl, n_substeps):
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
    pattern = []
    for _ in range(n_substeps):
        mujoco.mj_step(model, data)
        # Active contacts, every constraint's regime, and for dry friction whether it
        # slips (saturated force) and in which direction: stick/slip is a switch too.
        n = data.nefc
        friction = data.efc_type[:n] == mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF
        force = data.efc_force[:n][friction]
        slipping = np.abs(force) >= 0.999 * data.efc_frictionloss[:n][friction]
        pattern.append((data.ncon, tuple(data.efc_state[:n]), tuple(np.sign(force)), tuple(slipping)))
    return np.concatenate([data.qpos, data.qvel]), tuple(pattern)


def c_jacobians(model, x, u, n_substeps, eps=1e-6):
    """Central differences of the control step in MuJoCo C (float64)."""
    nq = model.nq
    base_pattern = c_step(model, x[:nq], x[nq:], u, n_substeps)[1]
    same_pattern = True

    def f(x_, u_):
        nonlocal same_pattern
        y, pattern = c_step(model, x_[:nq], x_[nq:], u_, n_substeps)
        same_pattern &= pattern == base_pattern
        return y

    A = np.stack([(f(x + eps * e, u) - f(x - eps * e, u)) / (2 * eps) for e in np.eye(len(x))], 1)
    B = np.stack([(f(x, u + eps * e) - f(x, u - eps * e)) / (2 * eps) for e in np.eye(len(u))], 1)
    return A, B, same_pattern, base_pattern


def _states(rng, contact: bool, n: int):
    """States with the pusher pressing a box face (contact) or well clear of it."""
    out = []
    for _ in range(n):
        box = rng.uniform(-0.1, 0.1, 2)
        yaw = rng.uniform(-0.3, 0.3)
        side = rng.integers(4)
        normal = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]][side], float)
        rot = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
        n_world = rot @ normal
        tangent = np.array([-n_world[1], n_world[0]])
        gap = -0.002 if contact else rng.uniform(0.06, 0.1)
        pusher = box + n_world * (0.05 + 0.025 + gap) + tangent * rng.uniform(-0.02, 0.02)
        push_dir = -n_world
        qvel = np.zeros(5)
        # The box slides and spins fast enough that no velocity component reaches zero
        # within the step: its dry friction stays in the slip regime (a stick/slip switch
        # is a non-smooth boundary like contact on/off).
        qvel[2:4] = rng.choice([-1.0, 1.0], 2) * rng.uniform(0.2, 0.35, 2)
        qvel[4] = rng.choice([-1.0, 1.0]) * rng.uniform(1.5, 2.5)
        if contact:
            qvel[:2] = qvel[2:4] + 0.1 * push_dir  # closing in on the face
            action = np.clip(push_dir * rng.uniform(0.6, 0.9), -1, 1)
        else:
            action = rng.uniform(-0.3, 0.3, 2)
        out.append((np.concatenate([pusher, box, [yaw]]), qvel, action))
    return out


@pytest.mark.integration
@pytest.mark.parametrize("contact", [False, True], ids=["free", "contact"])
def test_exact_jacobians_match_mujoco_c_finite_differences(env, contact):
    jax_env = env.unwrapped.jax_env
    model = env.unwrapped.model
    n_sub = jax_env.physics.n_substeps
    rng = np.random.default_rng(1 if contact else 2)
    checked = mismatched = 0
    worst = 0.0
    for qpos, qvel, action in _states(rng, contact, 30):
        x = np.concatenate([qpos, qvel])
        A_fd, B_fd, same, pattern = c_jacobians(model, x, action.astype(np.float64), n_sub)
        ncon = [p[0] for p in pattern]
        if not same or (contact and min(ncon) == 0) or (not contact and max(ncon) > 0):
            continue  # on a contact on/off boundary, or not the regime asked for
        env.unwrapped.set_state(qpos, qvel)
        out = env.unwrapped.grad_step(action.astype(np.float32), estimator="exact")
        y_c = c_step(model, qpos, qvel, action, n_sub)[0]
        if np.abs(np.concatenate(env.unwrapped.get_state()[:2]) - y_c).max() > 1e-4:
            mismatched += 1  # MJX and C took different regimes: not the same step
            continue
        A, B = out.jacobians.A, out.jacobians.B
        err_A = np.linalg.norm(A - A_fd) / np.linalg.norm(A_fd)
        err_B = np.linalg.norm(B - B_fd) / max(np.linalg.norm(B_fd), 1e-9)
        worst = max(worst, err_A, err_B)
        assert err_A < 1e-3 and err_B < 1e-3, (err_A, err_B, qpos, qvel, action)
        checked += 1
        if checked == 10:
            break
    print(
        f"checked {checked} states ({'contact' if contact else 'free'}), worst rel. error {worst:.2e}, "
        f"{mismatched} skipped where MJX and C disagreed on the step itself"
    )
    assert checked == 10 and mismatched <= 2


@pytest.mark.integration
def test_exact_jacobians_with_the_box_held_by_dry_friction(env):
    """The box at rest (held by its joints' dry friction) while the pusher moves freely.

    Here MJX's solver starts at its optimum and runs no iteration, so differentiating
    through the solver loop returns the unconstrained tangent (d box velocity / d box
    velocity = 1 instead of ~0); ``physics.implicit_step`` gives the implicit-function
    derivative instead. Regression test for that bug."""
    jax_env = env.unwrapped.jax_env
    model = env.unwrapped.model
    n_sub = jax_env.physics.n_substeps
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(20):
        qpos = np.concatenate(
            [rng.uniform(-0.4, -0.3, 1), rng.uniform(-0.3, 0.3, 1), rng.uniform(0.0, 0.1, 2), rng.uniform(-0.3, 0.3, 1)]
        )
        qvel = np.concatenate([rng.uniform(-0.2, 0.2, 2), np.zeros(3)])
        action = rng.uniform(-0.3, 0.3, 2)
        x = np.concatenate([qpos, qvel])
        A_fd, B_fd, _, pattern = c_jacobians(model, x, action, n_sub)
        # No contact and the box's dry friction sticking (not slipping) at every substep,
        # also under +-1e-5 on every state coordinate: away from stick/slip switches.
        probes = [pattern] + [
            c_step(model, *np.split(x + d * e, [5]), action, n_sub)[1] for e in np.eye(10) for d in (1e-5, -1e-5)
        ]
        if any(p[0] > 0 or any(p[3]) for pat in probes for p in pat):
            continue
        env.unwrapped.set_state(qpos, qvel)
        out = env.unwrapped.grad_step(action.astype(np.float32), estimator="exact")
        A = np.asarray(out.jacobians.A, np.float64)
        assert np.abs(A_fd[7:, 7:]).max() < 0.05  # friction holds the box: d v_box / d v_box ~ 0
        err_A = np.linalg.norm(A - A_fd) / np.linalg.norm(A_fd)
        err_B = np.linalg.norm(out.jacobians.B - B_fd) / np.linalg.norm(B_fd)
        assert err_A < 1e-3 and err_B < 1e-3, (err_A, err_B, qpos, qvel, action)
        checked += 1
        if checked == 5:
            break
    assert checked == 5


@pytest.mark.integration
def test_reward_jacobians_match_finite_differences(env):
    """r_x and r_a against central differences of the task reward over MuJoCo C steps."""
    jax_env = env.unwrapped.jax_env
    model = env.unwrapped.model
    n_sub = jax_env.physics.n_substeps
    info = None

    @jax.jit
    def reward_of(qpos0, qvel0, qpos1, qvel1, action, goal, goal_yaw):
        d0 = jax_env.physics.make_data(qpos0, qvel0)
        d1 = jax_env.physics.make_data(qpos1, qvel1)
        return jax_env.reward(d0, action, d1, {"goal": goal, "goal_yaw": goal_yaw})[0]

    rng = np.random.default_rng(3)
    checked = 0
    for qpos, qvel, action in _states(rng, True, 20) + _states(rng, False, 20):
        x = np.concatenate([qpos, qvel])
        eps = 1e-4  # the reward is float32: smaller steps drown in rounding noise
        _, _, same, _ = c_jacobians(model, x, action, n_sub, eps=eps)
        if not same:
            continue
        env.unwrapped.set_state(qpos, qvel)
        info = env.unwrapped.simulation.state.info
        goal, goal_yaw = info["goal"], info["goal_yaw"]

        def r(x_, u_):
            y, _ = c_step(model, x_[:5], x_[5:], u_, n_sub)
            return float(reward_of(x_[:5], x_[5:], y[:5], y[5:], u_.astype(np.float32), goal, goal_yaw))

        rx_fd = np.array([(r(x + eps * e, action) - r(x - eps * e, action)) / (2 * eps) for e in np.eye(10)])
        ra_fd = np.array([(r(x, action + eps * e) - r(x, action - eps * e)) / (2 * eps) for e in np.eye(2)])
        out = env.unwrapped.grad_step(action.astype(np.float32), estimator="exact")
        y_c = c_step(model, qpos, qvel, action, n_sub)[0]
        if np.abs(np.concatenate(env.unwrapped.get_state()[:2]) - y_c).max() > 1e-4:
            continue  # MJX and C took different regimes: not the same step
        scale_x, scale_a = np.linalg.norm(rx_fd), np.linalg.norm(ra_fd)
        # The task reward runs in float32, so its differences need eps ~1e-4: rounding noise
        # ~1e-7 / dt / eps ~ 0.01 plus O(eps) curvature error at stiff contact (~1%).
        assert np.linalg.norm(out.jacobians.r_x - rx_fd) <= 2e-2 * scale_x + 0.02, (out.jacobians.r_x, rx_fd)
        assert np.linalg.norm(out.jacobians.r_a - ra_fd) <= 2e-2 * scale_a + 0.02, (out.jacobians.r_a, ra_fd)
        checked += 1
        if checked == 10:
            break
    assert checked == 10


@pytest.mark.long  # tests/test_gym.py checks exact grad_step against step; plain_step's test checks bcg
def test_grad_step_advances_like_step(env):
    env.reset(seed=5)
    qpos, qvel, _ = env.unwrapped.get_state()
    action = np.array([0.4, -0.7], np.float32)
    obs_step, r_step, *_ = env.step(action)
    env.unwrapped.set_state(qpos, qvel)
    for estimator in ("exact", "bcg"):
        env.unwrapped.set_state(qpos, qvel)
        out = env.unwrapped.grad_step(action, estimator=estimator)
        np.testing.assert_allclose(out.observation, obs_step, rtol=1e-5, atol=1e-6)
        assert out.reward == pytest.approx(r_step, rel=1e-5, abs=1e-6)


def test_get_and_set_state_round_trip(env):
    env.reset(seed=1)
    qpos = np.array([0.2, -0.1, 0.0, 0.05, 0.3])
    qvel = np.array([0.1, 0.0, -0.2, 0.0, 0.5])
    env.unwrapped.set_state(qpos, qvel)
    q, v, act = env.unwrapped.get_state()
    np.testing.assert_allclose(q, qpos, atol=1e-6)
    np.testing.assert_allclose(v, qvel, atol=1e-6)
    assert act.shape == (0,)


def _pressing_state():
    # Pusher driven hard into the box's -x face.
    return np.array([-0.078, 0.0, 0.0, 0.0, 0.0]), np.array([0.6, 0.0, 0.0, 0.0, 0.0]), np.array([1.0, 0.0], np.float32)


@pytest.mark.integration
def test_bcg_is_exact_without_pressing_contact_and_bundles_when_pressing(env):
    threshold = env.unwrapped.jax_env.bundle.force_threshold
    env.reset(seed=2)
    qpos, qvel = np.array([-0.3, -0.3, 0.2, 0.2, 0.0]), np.zeros(5)
    action = np.array([0.2, 0.1], np.float32)
    env.unwrapped.set_state(qpos, qvel)
    bcg = env.unwrapped.grad_step(action, estimator="bcg")
    env.unwrapped.set_state(qpos, qvel)
    exact = env.unwrapped.grad_step(action, estimator="exact")
    assert not bcg.info["bundled"] and bcg.info["max_contact_force"] <= threshold
    np.testing.assert_allclose(bcg.jacobians.A, exact.jacobians.A, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bcg.jacobians.B, exact.jacobians.B, rtol=1e-5, atol=1e-6)

    qpos, qvel, action = _pressing_state()
    env.unwrapped.set_state(qpos, qvel)
    bcg = env.unwrapped.grad_step(action, estimator="bcg")
    env.unwrapped.set_state(qpos, qvel)
    exact = env.unwrapped.grad_step(action, estimator="exact")
    assert bcg.info["bundled"] and bcg.info["max_contact_force"] > threshold
    assert not np.allclose(bcg.jacobians.A, exact.jacobians.A, rtol=1e-3)
    assert np.isfinite(bcg.jacobians.A).all() and np.isfinite(bcg.jacobians.B).all()


def test_render_rgb_array():
    e = gym.make(ENV_ID, render_mode="rgb_array", width=64, height=48)
    e.reset(seed=0)
    img = e.render()
    e.close()
    assert img.shape == (48, 64, 3) and img.dtype == np.uint8
    assert img.std() > 1.0  # not a blank frame


# ----- success and scoring ----------------------------------------------------------------
def test_success_definition_on_hand_built_states():
    """Box centre within 2 cm of the goal and yaw within 0.2 rad (wrapped)."""
    from types import SimpleNamespace

    import jax.numpy as jnp

    task = bcg_envs.make_jax("BoxPush-v0")
    info = {"goal": jnp.array([0.1, -0.05]), "goal_yaw": jnp.array(0.3)}

    def success(dx, dyaw):
        qpos = jnp.array([0.3, 0.3, 0.1 + dx, -0.05, 0.3 + dyaw])
        return bool(task.success(SimpleNamespace(qpos=qpos), info))

    assert success(0.0, 0.0) and success(0.019, 0.19) and success(-0.019, -0.19)
    assert not success(0.021, 0.0) and not success(0.0, 0.21) and not success(0.0, -0.21)
    assert success(0.0, 2 * np.pi - 0.1)  # yaw error wraps


@pytest.fixture(scope="module")
def scores():
    from bcg_envs.envs.box_push.scripted import POLICIES
    from bcg_envs.envs.evaluation import run_episodes

    return {k: run_episodes("BoxPush-v0", make(), episodes=20, backend="mujoco") for k, make in POLICIES.items()}


@pytest.mark.integration
def test_escape_scores_below_doing_nothing_and_the_scripted_push_above_both(scores):
    """20 seeds (MuJoCo C): ending the episode early forfeits the remaining steps' reward."""
    escape, nothing, scripted = (scores[k] for k in ("escape", "nothing", "scripted"))
    assert np.all(escape["lengths"] < 40) and np.all(nothing["lengths"] == 200)  # the escape does escape
    assert escape["mean_return"] < nothing["mean_return"] < scripted["mean_return"]
    assert escape["returns"].max() < nothing["returns"].min()  # on every seed
    assert scripted["success_rate"] >= 0.9 and nothing["success_rate"] == 0 and escape["success_rate"] == 0


@pytest.mark.integration
def test_shipped_learned_policies_load_and_score_between_doing_nothing_and_the_script(scores):
    """The shipped SB3 PPO and SHAC exact policies (2,097,152 env steps each) act on
    BoxPush's observation and, on 20 seeds, do better than doing nothing but worse than
    the scripted push; SHAC's above PPO's (baselines/results/README.md)."""
    from bcg_envs.export import trained_policy

    for learner in ("sb3_ppo", "shac_exact"):
        policy = trained_policy("BoxPush-v0", learner)
        assert policy.observation_size == 17 and policy.action_size == 2 and policy.env_id == "BoxPush-v0"
    nothing, ppo, shac, scripted = (
        scores[k]["mean_return"] for k in ("nothing", "trained", "trained_shac", "scripted")
    )
    assert nothing < ppo < shac < scripted


@pytest.mark.long
def test_scripted_push_succeeds_in_90_percent_of_100_episodes():
    from bcg_envs.envs.box_push.scripted import scripted_push
    from bcg_envs.envs.evaluation import run_episodes

    result = run_episodes("BoxPush-v0", scripted_push, episodes=100, backend="mujoco")
    assert result["success_rate"] >= 0.9, result["success_rate"]


@pytest.mark.parametrize("env_id, soft, moreau", [("BoxPush-v0", 10.0, 5.0), ("PlanarHand-v0", 5.0, 2.5)])
def test_bcg_threshold_follows_the_contact_model(env_id, soft, moreau):
    """The task's measured trigger under MuJoCo's contact and under the Moreau model (its
    impacts are softer); an explicit threshold wins over both."""
    from bcg_envs import BundleConfig, make_jax

    assert make_jax(env_id).bundle.force_threshold == soft
    assert make_jax(env_id, contact_model="moreau").bundle.force_threshold == moreau
    explicit = make_jax(env_id, contact_model="moreau", bundle=BundleConfig(force_threshold=7.0))
    assert explicit.bundle.force_threshold == 7.0
