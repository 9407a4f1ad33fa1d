"""bcg_envs/gym.py: the Gymnasium vector env over MJX (``gym.make_vec``): spaces, same-step
autoreset, batched grad_step, and the input checks; on both backends, ``get_state``/``set_state``
with the episode step counter. The MuJoCo C backend's vector env is in
``tests/mujoco_backend/test_envs.py``."""

import gymnasium as gym
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)
from bcg_envs.gym import GymVectorEnv

#: 64 envs and 4-step episodes, as the batched-step hang check in tests/test_cpu_runtime.py
#: makes them: one compiled program serves both (the persistent compile cache).
N = 64


@pytest.fixture(scope="module")
def vec():
    v = gym.make_vec(
        "bcg_envs/BoxPush-v0", num_envs=N, vectorization_mode="vector_entry_point", config={"episode_length": 4}
    )
    yield v
    v.close()


def test_make_vec_gives_the_mjx_vector_env_with_batched_spaces(vec):
    assert isinstance(vec, GymVectorEnv)
    assert vec.single_observation_space.shape == (17,) and vec.single_action_space.shape == (2,)
    assert vec.observation_space.shape == (N, 17) and vec.action_space.shape == (N, 2)


def test_step_autoresets_on_the_same_step(vec):
    obs, info = vec.reset(seed=0)
    assert obs.shape == (N, 17) and obs.dtype == np.float32 and obs in vec.observation_space
    rng = np.random.default_rng(0)
    for _ in range(4):
        obs, rew, term, trunc, info = vec.step(rng.uniform(-1, 1, (N, 2)).astype(np.float32))
        assert rew.shape == (N,) and rew.dtype == np.float32 and np.isfinite(rew).all()
    assert trunc.all() and not term.any() and info["_final_obs"].all()
    assert (info["step"] == 4).all()
    assert info["is_success"].dtype == bool and info["is_success"].shape == (N,)
    assert not np.allclose(info["final_obs"], obs)  # obs is the new episodes' first
    assert obs in vec.observation_space
    assert info["_final_info"].all() and info["final_info"]["_is_success"].all()
    np.testing.assert_array_equal(info["final_info"]["step"], info["step"])


def test_final_info_has_gymnasiums_layout():
    """At an episode's end ``info["final_info"]`` has the keys, masks and shapes that
    Gymnasium's own SyncVectorEnv (same-step autoreset) gives over the single envs, with
    the ended step's values (``info`` keeps them too)."""
    kwargs = dict(backend="mujoco", config={"episode_length": 2})
    ours = gym.make_vec("bcg_envs/BoxPush-v0", num_envs=2, vectorization_mode="vector_entry_point", **kwargs)
    reference = gym.vector.SyncVectorEnv(
        [lambda: gym.make("bcg_envs/BoxPush-v0", **kwargs) for _ in range(2)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    actions = np.zeros((2, 2), np.float32)
    for env in (ours, reference):
        env.reset(seed=0)
        _, _, _, _, first = env.step(actions)
        assert "final_info" not in first or not first["_final_info"].any()
    _, _, _, trunc, info = ours.step(actions)
    _, _, _, ref_trunc, ref_info = reference.step(actions)
    assert trunc.all() and ref_trunc.all()
    assert info["_final_info"].all() and ref_info["_final_info"].all()
    assert set(info["final_info"]) == set(ref_info["final_info"])
    for key, value in ref_info["final_info"].items():  # the episodes' draws differ: masks, shapes, counters
        assert np.shape(info["final_info"][key]) == np.shape(value), key
        if key.startswith("_") or key in ("step", "truncated"):
            np.testing.assert_array_equal(info["final_info"][key], value, err_msg=key)
    np.testing.assert_array_equal(info["step"], ref_info["final_info"]["step"])
    ours.close()
    reference.close()


@pytest.mark.integration
def test_grad_step_advances_like_step(vec):
    actions = np.tile(np.array([[0.7, -0.2]], np.float32), (N, 1))
    vec.reset(seed=1)
    obs_step, rew_step, *_ = vec.step(actions)
    vec.reset(seed=1)
    out = vec.grad_step(actions, estimator="exact")
    np.testing.assert_allclose(out.observation, obs_step, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.reward, rew_step, rtol=1e-5, atol=1e-6)
    jac = out.jacobians
    assert jac.A.shape == (N, 10, 10) and jac.B.shape == (N, 10, 2) and jac.C.shape == (N, 17, 10)
    assert jac.r_x.shape == (N, 10) and jac.r_a.shape == (N, 2)
    assert all(np.isfinite(j).all() for j in jac)


@pytest.mark.parametrize(
    "actions, match",
    [
        (np.zeros((N + 1, 2), np.float32), rf"actions must have shape \({N}, 2\)"),
        (np.full((N, 2), np.nan, np.float32), "actions must be finite"),
    ],
)
def test_bad_actions_are_rejected_by_name(vec, actions, match):
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        vec.step(actions)


def test_single_env_task_info_is_the_episodes():
    """``GymEnv.task_info()`` holds the episode's goal on both backends (same reset seed,
    same goal), and needs a reset first."""
    from bcg_envs.gym import GymEnv

    goals = []
    for backend in ("mjx", "mujoco"):
        e = GymEnv("BoxPush-v0", backend=backend)
        with pytest.raises(RuntimeError, match="call reset"):
            e.task_info()
        e.reset(seed=5)
        goals.append(np.asarray(e.task_info()["goal"], np.float64))
        e.close()
    np.testing.assert_allclose(goals[0], goals[1], atol=1e-6)


def test_step_before_reset_and_bad_num_envs():
    v = GymVectorEnv("BoxPush-v0", 2)
    with pytest.raises(RuntimeError, match="call reset"):
        v.step(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1"):
        GymVectorEnv("BoxPush-v0", 0)
    with pytest.raises(ValueError, match="backend must be one of"):
        GymVectorEnv("BoxPush-v0", 2, backend="warp")


@pytest.mark.parametrize(
    "backend, estimators",
    [
        ("mujoco", ("exact", "bundle", "zeroth", "bcg", "alpha")),
        pytest.param("mjx", ("exact", "zeroth"), marks=pytest.mark.integration),
    ],
)
def test_restored_state_counts_one_episode_step_per_step_not_per_call(backend, estimators):
    """``get_state`` carries the episode step counter and ``set_state(..., step=...)``
    restores it: ``grad_step`` with several estimators from one restored state advances
    ``info["step"]`` by one per restored step, not by the number of calls."""
    from bcg_envs.gym import EnvState

    env = gym.make("bcg_envs/BoxPush-v0", backend=backend)
    sim = env.unwrapped
    env.reset(seed=3)
    for _ in range(2):
        env.step(np.zeros(2, np.float32))
    for expected in (3, 4, 5):
        state = sim.get_state()
        assert isinstance(state, EnvState) and len(state) == 3 and state.step == expected - 1
        qpos, qvel, act = state  # the (qpos, qvel, act) contract
        assert qpos.shape == (sim.model.nq,) and act.shape == (sim.model.na,)
        for estimator in estimators:
            sim.set_state(*state, step=state.step)
            out = sim.grad_step(np.array([0.5, -0.2], np.float32), estimator=estimator)
            assert out.info["step"] == expected and not out.truncated
    assert int(sim.task_info()["step"]) == 5
    sim.set_state(qpos, qvel)  # without step: the count is kept
    assert sim.get_state().step == 5
    sim.set_state(qpos, qvel, step=sim.jax_env.episode_length - 1)
    assert env.step(np.zeros(2, np.float32))[3]  # the episode's last step truncates
    with pytest.raises(ValueError, match="step must be a non-negative integer"):
        sim.set_state(qpos, qvel, step=-1)
    with pytest.raises(ValueError, match="step must be a non-negative integer"):
        sim.set_state(qpos, qvel, step=2.5)
    env.close()


def test_env_state_is_a_three_tuple_with_the_step():
    import pickle

    from bcg_envs.gym import EnvState

    s = EnvState(np.zeros(2), np.ones(2), np.zeros(0), step=7)
    assert tuple(s)[1] is s.qvel and s.step == 7 and "step=7" in repr(s)
    copy = pickle.loads(pickle.dumps(s))
    assert isinstance(copy, EnvState) and copy.step == 7 and np.array_equal(copy.qvel, s.qvel)
