"""SHAC's losses (``bcg_envs.learners.shac.losses``) against hand-computed values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bcg_envs.learners import networks
from bcg_envs.learners.shac import losses
from bcg_envs.learners.shac.networks import NetworkConfig, make_shac_networks

R = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], np.float32)  # (horizon 3, 2 envs)
V = np.array([[4.0, 4.0], [6.0, 6.0], [8.0, 8.0]], np.float32)  # value after each step
NO_END = np.zeros((3, 2), bool)


@pytest.mark.parametrize(
    "lam, ended, expected",
    [
        # lambda 0: one-step TD, G_t = r_t + gamma v_t
        (0.0, NO_END, [[3.0, 3.0], [5.0, 5.0], [7.0, 7.0]]),
        # lambda 1: the discounted return bootstrapped at the horizon, 3 + .5*8 = 7,
        # 2 + .5*7 = 5.5, 1 + .5*5.5 = 3.75
        (1.0, NO_END, [[3.75, 3.75], [5.5, 5.5], [7.0, 7.0]]),
        # lambda .5: 7; 2 + .5*(.5*6 + .5*7) = 5.25; 1 + .5*(.5*4 + .5*5.25) = 3.3125. Env 1's
        # episode ends at t = 1: G_1 = 2 + .5*6 = 5 and G_0 = 1 + .5*(.5*4 + .5*5) = 3.25.
        (0.5, np.array([[False, False], [False, True], [False, False]]), [[3.3125, 3.25], [5.25, 5.0], [7.0, 7.0]]),
    ],
)
def test_td_lambda_targets_by_hand(lam, ended, expected):
    targets = losses.td_lambda_targets(jnp.asarray(R), jnp.asarray(V), jnp.asarray(ended), 0.5, lam)
    np.testing.assert_allclose(np.asarray(targets), np.asarray(expected, np.float32), rtol=1e-6)


def test_polyak_and_select_tree():
    target, online = {"w": jnp.array([1.0, 2.0])}, {"w": jnp.array([3.0, 4.0])}
    np.testing.assert_allclose(losses.polyak_update(target, online, 0.2)["w"], [0.2 + 2.4, 0.4 + 3.2], rtol=1e-6)
    np.testing.assert_array_equal(losses.select_tree(jnp.asarray(False), online, target)["w"], target["w"])
    np.testing.assert_array_equal(losses.select_tree(jnp.asarray(True), online, target)["w"], online["w"])


def _setup(env, num_envs=4):
    nets = make_shac_networks(NetworkConfig(env.observation_size, env.action_size, (8,), (8,)))
    dummy = jnp.zeros((1, env.observation_size))
    actor = nets.actor.init(jax.random.PRNGKey(0), dummy)
    critic = nets.critic.init(jax.random.PRNGKey(1), dummy)
    state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(2), num_envs))
    return nets, actor, critic, state


def test_rollout_loss_restarts_the_discount_at_an_episode_end(point_mass):
    """Episodes truncated after the second of 3 steps: the loss is
    -(r0 + g r1 + g^2 V'(s_2) + r2 + g V'(s_3)) / (n h) per env, in scaled rewards."""
    nets, actor, critic, state = _setup(point_mass)
    n, gamma, scale = 4, 0.9, 2.0
    state = state.replace(info=dict(state.info, step=jnp.full((n,), point_mass.episode_length - 2, jnp.int32)))
    normalizer = networks.normalizer_init(point_mass.observation_size)
    loss, (final, ep_return, ep_length, traj) = losses.rollout_loss(
        actor,
        critic,
        normalizer,
        state,
        jnp.zeros(n),
        jnp.zeros(n, jnp.int32),
        jax.random.PRNGKey(3),
        nets=nets,
        reset_batch=jax.vmap(point_mass.reset),
        step_batch=jax.vmap(point_mass.step),
        horizon=3,
        gamma=gamma,
        reward_scaling=scale,
    )
    r, v = np.asarray(traj["reward"]), np.asarray(traj["v_next"])
    np.testing.assert_array_equal(np.asarray(traj["ended"]), [[False] * n, [True] * n, [False] * n])
    expected = -np.sum(r[0] + gamma * r[1] + gamma**2 * v[1] + r[2] + gamma * v[2]) / (n * 3)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    # the episode bookkeeping is unscaled; the new episodes ran one step
    np.testing.assert_allclose(np.asarray(traj["finished_return"])[1], (r[0] + r[1]) / scale, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(ep_length), 1)
    np.testing.assert_allclose(np.asarray(ep_return), r[2] / scale, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(final.info["step"]), 1)


def test_critic_update_fits_and_skips_non_finite_minibatches():
    critic = networks.Critic((8,))
    obs = jax.random.normal(jax.random.PRNGKey(0), (2, 4, 3))  # (horizon, envs, obs): 8 samples
    targets = jnp.full((2, 4), 2.0)
    params = critic.init(jax.random.PRNGKey(1), obs[0])
    tx = optax.chain(optax.clip_by_global_norm(10.0), optax.scale_by_adam(b1=0.7, b2=0.95))
    kw = dict(critic=critic, tx=tx, iterations=8, minibatches=2)
    new, _, mse, bad = losses.critic_update(params, tx.init(params), obs, targets, jax.random.PRNGKey(2), 1e-2, **kw)
    assert mse.shape == (8, 2) and int(bad) == 0
    assert float(jnp.mean(mse[-1])) < float(jnp.mean(mse[0]))
    # one NaN target falls in exactly one of the 2 minibatches of every epoch
    new, _, _, bad = losses.critic_update(
        params, tx.init(params), obs, targets.at[0, 0].set(jnp.nan), jax.random.PRNGKey(2), 1e-2, **kw
    )
    assert int(bad) == 8 and all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(new))
