"""SHAC's network assembly: the actor's initial output scale."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from bcg_envs.learners.shac.networks import NetworkConfig, make_shac_networks


@pytest.mark.parametrize("scale", [1e-2, 1e-4])
def test_actor_output_scale_sets_the_initial_mean_spread(scale):
    """Over LayerNorm features the initial mean's std is about sqrt(scale), across inits."""
    config = NetworkConfig(observation_size=8, action_size=4, actor_hidden=(64, 64), actor_output_scale=scale)
    actor = make_shac_networks(config).actor
    obs = jax.random.normal(jax.random.PRNGKey(0), (256, 8))
    means = []
    for seed in range(8):
        params = actor.init(jax.random.PRNGKey(seed), obs[:1])
        means.append(np.asarray(actor.apply(params, obs)[0]))
    spread = float(np.std(np.concatenate(means)))
    assert 0.5 * np.sqrt(scale) < spread < 2.0 * np.sqrt(scale)


def test_actor_output_scale_reaches_the_network_config():
    """The network config keeps ``actor_output_scale`` through its dict form; configs
    written before the field read as the old fixed scale. (``train`` storing it in its
    checkpoints: ``test_checkpoint.py::test_policy_from_checkpoint_alone``.)"""
    d = NetworkConfig(observation_size=3, action_size=2, actor_output_scale=1e-4).to_dict()
    assert NetworkConfig.from_dict(d).actor_output_scale == 1e-4
    older = {k: v for k, v in d.items() if k != "actor_output_scale"}  # checkpoints before the field
    assert NetworkConfig.from_dict(older).actor_output_scale == 0.01
