"""Bad input gets a clear error naming the argument; divergence never crashes."""

import gymnasium as gym
import numpy as np
import pytest

import bcg_envs
from bcg_envs import BundleConfig

ENV_ID = "bcg_envs/BoxPush-v0"


@pytest.fixture(scope="module")
def env():
    e = gym.make(ENV_ID)
    e.reset(seed=0)
    yield e
    e.close()


def test_list_envs_has_every_required_id():
    ids = bcg_envs.list_envs()
    for name in ("BoxPush", "PlanarHand", "G1Jump", "G1Squat", "G1Kick", "G1Track"):
        assert f"bcg_envs/{name}-v0" in ids


def test_unknown_env_id():
    with pytest.raises(gym.error.Error):
        gym.make("bcg_envs/NoSuchEnv-v0")
    with pytest.raises(ValueError, match="unknown env id 'NoSuchEnv-v0'"):
        bcg_envs.make_jax("NoSuchEnv-v0")


def test_unknown_kwarg_names_it():
    with pytest.raises(TypeError, match="friction_boost") as err:
        gym.make(ENV_ID, friction_boost=2.0)
    accepted = str(err.value).split("accepted kwargs: ")[1]
    assert "'contact_model'" in accepted and "'args'" not in accepted and "'kwargs'" not in accepted


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(contact_stiffness="bouncy"), "contact_stiffness"),
        (dict(contact_stiffness=1e-5), "contact_stiffness"),
        (dict(estimator="magic"), "estimator"),
        (dict(bundle={"num_samples": 3}), "bundle"),
        (dict(render_mode="ansi"), "render_mode"),
        (dict(backend="warp"), "backend"),
        (dict(config={"episode_lenght": 3}), "episode_lenght"),
    ],
)
def test_invalid_make_kwargs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gym.make(ENV_ID, **kwargs)


def test_human_render_mode_is_gymnasiums_window_over_rgb_array():
    """``render_mode="human"`` is not the env's own: ``gym.make`` wraps the ``rgb_array``
    env in Gymnasium's ``HumanRendering``; the env class itself refuses it by name."""
    from gymnasium.wrappers import HumanRendering

    from bcg_envs.gym import GymEnv

    e = gym.make(ENV_ID, render_mode="human")
    assert isinstance(e, HumanRendering) and e.unwrapped.render_mode == "rgb_array"
    e.close()
    with pytest.raises(ValueError, match="render_mode must be None or 'rgb_array'"):
        GymEnv("BoxPush-v0", render_mode="human")


def test_invalid_bundle_config():
    with pytest.raises(ValueError, match="BundleConfig.num_samples"):
        BundleConfig(num_samples=-1)


def test_step_before_reset():
    e = gym.make(ENV_ID).unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        e.step(np.zeros(2, np.float32))
    with pytest.raises(RuntimeError, match="reset"):
        e.grad_step(np.zeros(2, np.float32))


@pytest.mark.parametrize(
    "action, match",
    [
        (np.zeros(3, np.float32), r"action must have shape \(2,\)"),
        (np.zeros((1, 2), np.float32), r"action must have shape \(2,\)"),
        (np.array(["a", "b"]), "action must be a real-valued array"),
        (np.array([True, False]), "action must be a real-valued array"),
        (np.array([np.nan, 0.0], np.float32), "action must be finite"),
        (np.array([np.inf, 0.0], np.float32), "action must be finite"),
    ],
)
def test_bad_actions(env, action, match):
    with pytest.raises(ValueError, match=match):
        env.unwrapped.step(action)
    with pytest.raises(ValueError, match=match):
        env.unwrapped.grad_step(action, estimator="exact")


def test_bad_grad_step_arguments(env):
    with pytest.raises(ValueError, match="estimator"):
        env.unwrapped.grad_step(np.zeros(2, np.float32), estimator="fourth")
    with pytest.raises(ValueError, match="bundle"):
        env.unwrapped.grad_step(np.zeros(2, np.float32), bundle=dict(num_samples=2))


def test_bad_set_state(env):
    with pytest.raises(ValueError, match="qpos must have shape"):
        env.unwrapped.set_state(np.zeros(4), np.zeros(5))
    with pytest.raises(ValueError, match="qvel must be finite"):
        env.unwrapped.set_state(np.zeros(5), np.full(5, np.nan))


def test_divergence_ends_the_episode_with_finite_observations(env):
    env.reset(seed=0)
    qpos, _, _ = env.unwrapped.get_state()
    env.unwrapped.set_state(qpos, np.array([0.0, 0.0, 0.0, 0.0, 5e4]))  # box spinning at 5e4 rad/s
    obs, reward, terminated, truncated, info = env.step(np.zeros(2, np.float32))
    assert info["sim_diverged"] and terminated
    assert np.isfinite(obs).all() and np.isfinite(reward)
    obs, _ = env.reset(seed=1)  # and the run goes on
    obs, *_ = env.step(np.zeros(2, np.float32))
    assert np.isfinite(obs).all()
