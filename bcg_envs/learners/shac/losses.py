"""SHAC's losses and critic update: pure functions of explicit arguments.

* ``rollout_loss``: the actor's objective over one short-horizon rollout, differentiated
  through the environment step;
* ``td_lambda_targets``: the critic's regression targets from that rollout;
* ``critic_update``: epochs of minibatch regression of the critic onto the targets;
* ``polyak_update``: the target critic's moving average.

Rewards and values are in the env's reward units times ``reward_scaling``; time is in
env steps (``gamma`` discounts per step).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import jax
import jax.numpy as jnp
import optax

from bcg_envs.envs.autoreset import autoreset, episode_ended
from bcg_envs.learners import networks
from bcg_envs.learners.shac.networks import ShacNetworks

Trajectory = Dict[str, Any]


def select_tree(pred: jax.Array, new: Any, old: Any) -> Any:
    """Leafwise ``where(pred, new, old)`` of two pytrees of one structure (a scalar ``pred``
    keeps or rejects a whole update without a branch)."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), new, old)


def rollout_loss(
    actor_params: Any,
    target_critic: Any,
    normalizer: Dict[str, jax.Array],
    env_state: Any,
    ep_return: jax.Array,
    ep_length: jax.Array,
    key: jax.Array,
    *,
    nets: ShacNetworks,
    reset_batch: Callable,
    step_batch: Callable,
    horizon: int,
    gamma: jax.Array,
    reward_scaling: jax.Array,
) -> Tuple[jax.Array, Tuple[Any, jax.Array, jax.Array, Trajectory]]:
    """SHAC's actor loss ``-(sum_t gamma^t r_t + gamma^h V'(s_h)) / (num_envs * horizon)``.

    Rolls the batched envs (``env_state``, leading axis ``num_envs``) ``horizon`` steps
    with the reparameterized stochastic policy; the loss's gradient in ``actor_params``
    flows back through ``step_batch`` (whose backward pass is the chosen estimator). At
    an episode end (``state.done`` or ``info["truncated"]``) the discount restarts, the
    env resets (gradient cut) and the target critic ``V'`` bootstraps: 0 on termination,
    ``V'`` of the final observation on truncation and at the horizon. Rewards are scaled
    by ``reward_scaling``; ``normalizer`` is frozen (the observations it normalizes are
    returned for its update).

    Returns ``(loss, (final env state, ep_return, ep_length, trajectory))``: the running
    episodes' unscaled return/length and per-step (``horizon``, ``num_envs``) arrays
    ``obs`` (normalized), ``raw_obs``, ``reward`` (scaled), ``v_next``, ``ended``,
    ``done``, ``finished_return``/``finished_length`` (at episode ends), ``bundled``
    and ``env_metrics``, all without gradient.
    """
    n, h = ep_return.shape[0], horizon

    def body(carry, t):
        state, disc, ep_ret, ep_len = carry
        obs = nets.normalize(normalizer, state.obs)
        action = networks.sample_action(nets.actor, actor_params, obs, jax.random.fold_in(key, t))
        nxt = step_batch(state, action)
        reward = nxt.reward * reward_scaling
        done = nxt.done > 0
        ended = episode_ended(nxt)
        v_next = nets.critic.apply(target_critic, nets.normalize(normalizer, nxt.obs))
        v_next = jnp.where(done, 0.0, v_next)
        bootstrap = ended | (t == h - 1)
        objective = disc * reward + jnp.where(bootstrap, disc * gamma * v_next, 0.0)
        ep_ret = ep_ret + jax.lax.stop_gradient(nxt.reward)
        ep_len = ep_len + 1
        out = {
            "objective": objective,
            "obs": jax.lax.stop_gradient(obs),
            "raw_obs": jax.lax.stop_gradient(state.obs),
            "reward": jax.lax.stop_gradient(reward),
            "v_next": jax.lax.stop_gradient(v_next),
            "ended": ended,
            "done": done,
            "finished_return": jnp.where(ended, ep_ret, 0.0),
            "finished_length": jnp.where(ended, ep_len, 0),
            "bundled": nxt.info.get("bundled", jnp.zeros_like(done)),
            "env_metrics": jax.lax.stop_gradient(nxt.metrics),
        }
        nxt = autoreset(nxt, reset_batch, skip_if_none_ended=True)  # gradient cut at the reset
        disc = jnp.where(ended, 1.0, disc * gamma)
        ep_ret = jnp.where(ended, 0.0, ep_ret)
        ep_len = jnp.where(ended, 0, ep_len)
        return (nxt, disc, ep_ret, ep_len), out

    init = (env_state, jnp.ones((n,), jnp.float32), ep_return, ep_length)
    (state, _, ep_return, ep_length), traj = jax.lax.scan(body, init, jnp.arange(h))
    loss = -jnp.sum(traj.pop("objective")) / (n * h)
    aux = (jax.lax.stop_gradient(state), ep_return, ep_length, traj)
    return loss, aux


def td_lambda_targets(
    reward: jax.Array, v_next: jax.Array, ended: jax.Array, gamma: jax.Array, td_lambda: jax.Array
) -> jax.Array:
    """TD(lambda) value targets over the horizon (arrays ``(horizon, ...)``, time first).

    ``G_t = r_t + gamma * ((1 - lambda) * v_t + lambda * G_{t+1})``, where ``v_t`` is the
    (target) value of the state after step t; an episode end at t bootstraps with
    ``v_t`` alone (already 0 on termination) and the horizon end with ``V'(s_h)``
    (``G_h = v_{h-1}``), so that lambda = 0 gives one-step TD and lambda = 1 the
    discounted return up to the end of the episode or rollout.
    """

    def body(g_next, x):
        r, v, e = x
        g = r + gamma * jnp.where(e, v, (1.0 - td_lambda) * v + td_lambda * g_next)
        return g, g

    _, targets = jax.lax.scan(body, v_next[-1], (reward, v_next, ended), reverse=True)
    return targets


def critic_update(
    critic_params: Any,
    opt_state: Any,
    obs: jax.Array,
    targets: jax.Array,
    key: jax.Array,
    lr: jax.Array,
    *,
    critic: networks.Critic,
    tx: optax.GradientTransformation,
    iterations: int,
    minibatches: int,
) -> Tuple[Any, Any, jax.Array, jax.Array]:
    """``iterations`` epochs of ``minibatches`` minibatches of MSE regression of
    ``critic`` onto ``targets`` (one per observation of ``obs``, leading axes flattened).

    Minibatches are reshuffled every epoch (the remainder of an uneven split is left
    out); each step applies ``tx`` (clip, Adam) scaled by ``lr``. A minibatch with a
    non-finite loss or gradient is skipped. Returns ``(params, opt_state, losses
    (iterations, minibatches), number of skipped minibatches)``.
    """
    obs = obs.reshape(-1, obs.shape[-1])
    targets = targets.reshape(-1)
    size = obs.shape[0]
    mb = size // minibatches

    def loss_fn(params, idx):
        return jnp.mean(jnp.square(critic.apply(params, obs[idx]) - targets[idx]))

    def minibatch(carry, idx):
        params, opt = carry
        loss, grads = jax.value_and_grad(loss_fn)(params, idx)
        ok = jnp.isfinite(loss) & jnp.isfinite(optax.tree.norm(grads))
        grads = jax.tree.map(lambda g: jnp.where(ok, g, 0.0), grads)
        updates, new_opt = tx.update(grads, opt, params)
        new_params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
        return (select_tree(ok, new_params, params), select_tree(ok, new_opt, opt)), (loss, ~ok)

    def epoch(carry, k):
        perm = jax.random.permutation(k, size)[: mb * minibatches]
        return jax.lax.scan(minibatch, carry, perm.reshape(minibatches, mb))

    keys = jax.random.split(key, iterations)
    (critic_params, opt_state), (losses, bad) = jax.lax.scan(epoch, (critic_params, opt_state), keys)
    return critic_params, opt_state, losses, jnp.sum(bad)


def polyak_update(target: Any, online: Any, alpha: jax.Array) -> Any:
    """Target network ``alpha * target + (1 - alpha) * online`` (alpha 0: copy online)."""
    return jax.tree.map(lambda t, c: alpha * t + (1.0 - alpha) * c, target, online)
