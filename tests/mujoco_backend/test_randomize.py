"""Per-episode domain randomization (``randomize="episode"``) on the MuJoCo C backend:
the draw matches MJX's for the same seed, each reset (and each autoreset of the vector
env) writes a new draw into the C model that env steps, and the steps use it. BoxPush with
a custom randomization function (conftest.py's ``scale_masses``) in the default tier; G1's
own draw in the integration tier."""

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import bcg_envs
from bcg_envs.mujoco_backend.model_fields import write_model_fields
from bcg_envs.mujoco_backend.simulation import FULL_STATE
from bcg_envs.physics import model_fields
from tests.mujoco_backend.conftest import BOX, DRAWN, ENV_ID, MASS_RANGE, PUSHER, RANDOMIZE_KWARGS


def model_info(info):
    return {k: np.asarray(v) for k, v in info.items() if k.startswith(model_fields.INFO_PREFIX)}


def assert_model_has(model: mujoco.MjModel, info, index=None) -> None:
    """``model``'s fields are the drawn ones of ``info`` (env ``index`` of a batch)."""
    fields = model_fields.from_info(info)
    assert set(fields) == set(DRAWN)
    for name, value in fields.items():
        value = np.asarray(value if index is None else value[index])
        np.testing.assert_array_equal(getattr(model, name), value.astype(np.float64), err_msg=name)


def step_reference(nominal: mujoco.MjModel, info, start: np.ndarray, warm: np.ndarray, ctrl: np.ndarray, n: int):
    """qpos, qvel after ``n`` ``mj_step``s from ``start`` on ``nominal`` with the fields of
    ``info`` written in (None: as built)."""
    m = nominal.__copy__()
    d = mujoco.MjData(m)
    if info is not None:
        write_model_fields(m, d, model_fields.from_info(info))
    mujoco.mj_setState(m, d, start, FULL_STATE)
    d.qacc_warmstart[:] = warm
    d.ctrl[:] = ctrl
    for _ in range(n):
        mujoco.mj_step(m, d)
    return d.qpos.copy(), d.qvel.copy()


def test_same_seed_same_fields_as_mjx(c_env):
    """C and MJX draw the same fields from the same seed; the C model holds them exactly
    (float32 draws, float64 model) and equals MJX's episode model on every drawn field;
    the drawn constants are MuJoCo's own for the drawn masses (``mj_setConst``). A step
    from the shared initial state moves the pusher as MJX does (float32 tolerance), which
    the model as built does not."""
    mjx_env = gym.make(ENV_ID, backend="mjx", **RANDOMIZE_KWARGS).unwrapped
    try:
        _, c_info = c_env.reset(seed=7)
        _, mjx_info = mjx_env.reset(seed=7)
        c_fields, mjx_fields = model_info(c_info), model_info(mjx_info)
        assert set(c_fields) == set(mjx_fields) == {model_fields.INFO_PREFIX + n for n in DRAWN}
        for k in c_fields:
            assert c_fields[k].dtype == mjx_fields[k].dtype == np.float32, k
            np.testing.assert_allclose(c_fields[k], mjx_fields[k], rtol=1e-6, atol=0, err_msg=k)
        assert_model_has(c_env.model, c_info)
        mjx_model = mjx_env.jax_env.physics_of(mjx_env.task_info()).model
        for name in DRAWN:
            mjx_value = np.asarray(getattr(mjx_model, name))
            np.testing.assert_allclose(getattr(c_env.model, name), mjx_value, rtol=1e-6, err_msg=name)
        constants = c_env.model.__copy__()
        mujoco.mj_setConst(constants, mujoco.MjData(constants))
        for name in ("body_subtreemass", "body_invweight0", "dof_invweight0"):
            np.testing.assert_allclose(getattr(constants, name), getattr(c_env.model, name), rtol=1e-4, err_msg=name)

        np.testing.assert_allclose(c_env.data.qpos, np.asarray(mjx_env.data.qpos), atol=1e-6)
        start = np.zeros(c_env.simulation.core.s.nstate)
        mujoco.mj_getState(c_env.model, c_env.data, start, FULL_STATE)
        warm = c_env.data.qacc_warmstart.copy()
        action = np.array([0.8, -0.6], np.float32)
        c_env.step(action)
        mjx_env.step(action)
        qvel = c_env.data.qvel.copy()
        assert np.abs(qvel[:2]).max() > 0.1
        np.testing.assert_allclose(qvel, np.asarray(mjx_env.data.qvel), rtol=1e-4, atol=1e-5)
        task = c_env.simulation.task
        ctrl = task.action_map(action[None])[0]
        _, nominal_qvel = step_reference(task.model, None, start, warm, ctrl, task.n_substeps)
        assert np.abs(nominal_qvel - qvel).max() > 1e-2
    finally:
        mjx_env.close()


def test_each_reset_redraws_and_the_step_uses_the_draw(c_env):
    nominal = c_env.jax_env.mj_model
    before = nominal.body_mass.copy()
    masses = []
    for seed in (0, 1):
        _, info = c_env.reset(seed=seed)
        masses.append(info["model/body_mass"][[PUSHER, BOX]])
        assert_model_has(c_env.model, info)
        assert np.all((masses[-1] >= MASS_RANGE[0] * 0.5) & (masses[-1] <= MASS_RANGE[1] * 0.5))
    assert not np.any(np.isclose(masses[0], masses[1]))
    np.testing.assert_array_equal(nominal.body_mass, before)  # the JAX env's model is not written

    sim = c_env.simulation
    start = np.zeros(sim.core.s.nstate)
    mujoco.mj_getState(c_env.model, c_env.data, start, FULL_STATE)
    warm = c_env.data.qacc_warmstart.copy()
    action = np.array([1.0, -0.5], np.float32)
    _, _, _, _, info = c_env.step(action)
    ctrl = sim.task.action_map(action[None])[0]
    n = sim.task.n_substeps
    qpos, qvel = step_reference(nominal, info, start, warm, ctrl, n)
    np.testing.assert_allclose(c_env.data.qpos, qpos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(c_env.data.qvel, qvel, rtol=0, atol=1e-12)
    _, nominal_qvel = step_reference(nominal, None, start, warm, ctrl, n)
    assert np.abs(nominal_qvel - qvel).max() > 1e-3  # the drawn pusher mass changed the step

    state = c_env.get_state()  # set_state keeps the episode's model
    c_env.set_state(*state, step=state.step)
    assert_model_has(c_env.model, info)


def test_jax_env_given_draws_into_a_copy():
    jax_env = bcg_envs.make_jax("BoxPush-v0", **RANDOMIZE_KWARGS)
    e = gym.make(ENV_ID, backend="mujoco", jax_env=jax_env).unwrapped
    try:
        _, info = e.reset(seed=3)
        assert_model_has(e.model, info)
        assert e.model is not jax_env.mj_model and jax_env.mj_model.body_mass[PUSHER] == 0.5
    finally:
        e.close()


def test_vector_env_draws_per_env_and_redraws_at_autoreset():
    """Three envs of two-step episodes: each its own model, kept for the episode and
    redrawn at the autoreset; the rollout steps every env on its own model; a short
    random rollout and a batched ``grad_step`` stay finite."""
    n = 3
    vec = gym.make_vec(ENV_ID, num_envs=n, backend="mujoco", config={"episode_length": 2}, **RANDOMIZE_KWARGS)
    try:
        sim = vec.unwrapped.simulation
        _, info = vec.reset(seed=0)
        first = info["model/body_mass"]
        assert first.shape == (n, 4) and len({tuple(row) for row in first[:, PUSHER:]}) == n
        for i, core in enumerate(sim.cores):
            assert_model_has(core.s.model, info, i)

        starts = np.zeros((n, sim.task.nstate))
        for i, core in enumerate(sim.cores):
            mujoco.mj_getState(core.s.model, core.d, starts[i], FULL_STATE)
        warm = np.stack([core.d.qacc_warmstart.copy() for core in sim.cores])
        actions = np.tile(np.array([1.0, 0.3], np.float32), (n, 1))
        _, _, term, trunc, info = vec.step(actions)
        assert not np.any(term | trunc)
        ctrl = sim.task.action_map(actions)
        for i, core in enumerate(sim.cores):
            fields = {k: v[i] for k, v in model_info(info).items()}
            qpos, qvel = step_reference(sim.task.model, fields, starts[i], warm[i], ctrl[i], sim.task.n_substeps)
            np.testing.assert_allclose(core.d.qpos, qpos, rtol=0, atol=1e-12)
            np.testing.assert_allclose(core.d.qvel, qvel, rtol=0, atol=1e-12)

        _, _, term, trunc, info = vec.step(actions)
        assert np.all(term | trunc)
        np.testing.assert_array_equal(info["model/body_mass"], first)  # the ended episodes' models
        _, new_info = vec.reset(seed=0)  # same seed, same draws
        np.testing.assert_array_equal(new_info["model/body_mass"], first)
        vec.step(actions)
        _, _, _, _, info = vec.step(actions)  # autoreset: new episodes, new models
        _, _, _, _, info = vec.step(actions)
        redrawn = info["model/body_mass"]
        assert not np.any(np.isclose(redrawn[:, PUSHER:], first[:, PUSHER:]).all(axis=1))
        for i, core in enumerate(sim.cores):
            assert_model_has(core.s.model, info, i)

        rng = np.random.default_rng(0)
        for _ in range(6):
            obs, reward, _, _, info = vec.step(rng.uniform(-1, 1, (n, 2)).astype(np.float32))
            assert np.all(np.isfinite(obs)) and np.all(np.isfinite(reward)) and not np.any(info["sim_diverged"])
        res = vec.unwrapped.grad_step(rng.uniform(-1, 1, (n, 2)).astype(np.float32))
        assert all(np.all(np.isfinite(j)) for j in res.jacobians)
    finally:
        vec.close()


@pytest.mark.integration
def test_g1_draws_match_mjx_and_step_on_c():
    """G1's own per-episode draw (``domain_randomize``) on both backends from one seed; the
    C env steps it and redraws at the next reset."""
    kwargs = {"randomize": "episode", "config": {"episode_length": 4, "random_start": False}}
    c_env = gym.make("bcg_envs/G1Squat-v0", backend="mujoco", **kwargs).unwrapped
    mjx_env = gym.make("bcg_envs/G1Squat-v0", backend="mjx", **kwargs).unwrapped
    try:
        _, c_info = c_env.reset(seed=5)
        _, mjx_info = mjx_env.reset(seed=5)
        c_fields, mjx_fields = model_info(c_info), model_info(mjx_info)
        assert set(c_fields) == set(mjx_fields) and "model/body_mass" in c_fields
        for k in c_fields:
            np.testing.assert_allclose(c_fields[k], mjx_fields[k], rtol=1e-5, atol=1e-7, err_msg=k)
        for name, value in model_fields.from_info(c_info).items():
            np.testing.assert_array_equal(getattr(c_env.model, name), np.asarray(value, np.float64), err_msg=name)
        for _ in range(3):
            obs, reward, _, _, _ = c_env.step(np.zeros(c_env.action_space.shape, np.float32))
            assert np.all(np.isfinite(obs)) and np.isfinite(reward)
        _, again = c_env.reset(seed=6)
        assert not np.allclose(again["model/body_mass"], c_info["model/body_mass"])
        np.testing.assert_array_equal(c_env.model.body_mass, again["model/body_mass"].astype(np.float64))
    finally:
        c_env.close()
        mjx_env.close()
