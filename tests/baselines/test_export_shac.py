"""``baselines.export_shac``: a SHAC checkpoint's policy, exported, acts as SHAC's own."""

import jax
import numpy as np

from baselines.export_shac import export_shac
from bcg_envs.export import NumpyPolicy
from bcg_envs.learners import shac
from tests.learners.shac.conftest import PointMass


def test_exported_checkpoint_matches_the_deterministic_policy(tmp_path):
    kw = dict(
        num_envs=4,
        horizon=4,
        num_timesteps=2 * 16,
        actor_hidden=(16, 8),
        critic_hidden=(8,),
        critic_iterations=2,
        critic_minibatches=2,
        num_evals=0,
        progress_bar=False,
        checkpoint_every=1,
    )
    make_policy, params, _ = shac.train(PointMass(), checkpoint_dir=tmp_path / "ckpt", **kw)
    out = export_shac(tmp_path / "ckpt", tmp_path / "p.npz", env_id="PointMass")
    policy = NumpyPolicy.load(out)
    assert policy.env_id == "PointMass" and policy.observation_size == 6 and policy.action_size == 2
    obs = np.random.default_rng(0).normal(size=(32, 6)).astype(np.float32)
    want, _ = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(0))
    np.testing.assert_allclose(policy(obs), np.asarray(want), rtol=1e-4, atol=1e-5)
