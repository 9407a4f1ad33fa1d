"""SB3 PPO policies exported to the NumPy format act as SB3's deterministic predict does."""

import numpy as np
import pytest

from baselines.export_sb3 import export_sb3, sb3_policy_arrays
from bcg_envs.export import NumpyPolicy

pytest.importorskip("stable_baselines3")


def _model_and_stats(tmp_path, log_std_init=0.0):
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), norm_obs=True, norm_reward=False, clip_obs=1.5)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [16, 8], "log_std_init": log_std_init},
    )
    model.learn(64)  # moves the weights and the normalizer's statistics off their initial values
    model.save(str(tmp_path / "model.zip"))
    env.save(str(tmp_path / "vecnormalize.pkl"))
    return model, env


def test_exported_policy_matches_sb3_predict(tmp_path):
    model, env = _model_and_stats(tmp_path)
    out = export_sb3(tmp_path / "model.zip", tmp_path / "vecnormalize.pkl", tmp_path / "p.npz", "Pendulum-v1")
    policy = NumpyPolicy.load(out)
    assert policy.layer_sizes == [3, 16, 8, 1] and policy.output == "clip" and policy.env_id == "Pendulum-v1"
    rng = np.random.default_rng(0)
    # Pendulum's actions span [-2, 2]: SB3 clips to that, the export to [-1, 1]; scale the
    # comparison to stay inside both, and include observations the normalizer clips.
    obs = rng.normal(size=(64, 3)).astype(np.float32) * np.array([1.0, 1.0, 8.0], np.float32)
    expected = model.predict(env.normalize_obs(obs), deterministic=True)[0]
    got = policy(obs)
    inside = np.abs(expected) < 1.0
    assert inside.sum() > 10
    np.testing.assert_allclose(got[inside], expected[inside], atol=1e-5)
    assert np.all(np.abs(got) <= 1.0)
    np.testing.assert_allclose(got[~inside], np.sign(expected[~inside]))


def test_without_statistics_the_observation_is_raw(tmp_path):
    model, _ = _model_and_stats(tmp_path)
    arrays = sb3_policy_arrays(model, None)
    assert not bool(arrays["normalize_observations"]) and "obs_mean" not in arrays
    obs = np.ones((4, 3), np.float32) * 0.1
    expected = np.clip(model.predict(obs, deterministic=True)[0], -1.0, 1.0)
    np.testing.assert_allclose(NumpyPolicy(arrays)(obs), expected, atol=1e-5)
