"""Deterministic evaluation of a SHAC policy during training (one jitted program)."""

from __future__ import annotations

from typing import Any, Callable, Dict

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from bcg_envs.learners import networks
from bcg_envs.learners.shac.networks import ShacNetworks

#: The metrics ``make_evaluator``'s program returns.
EVAL_FIELDS = ("eval/episode_reward", "eval/episode_reward_std", "eval/episode_length", "eval/success")


def make_evaluator(
    nets: ShacNetworks,
    reset_batch: Callable,
    step_batch: Callable,
    num_envs: int,
    length: int,
    mesh: Mesh,
) -> Callable[[Any, Dict[str, jax.Array], jax.Array], Dict[str, jax.Array]]:
    """Jitted ``(actor_params, normalizer, key) -> metrics`` of the deterministic policy
    over one episode (at most ``length`` steps, no reset) of ``num_envs`` envs.

    ``reset_batch``/``step_batch`` are the env's batched reset and step. Envs are
    sharded over ``mesh``'s batch axis when ``num_envs`` divides evenly, else replicated.
    Metrics (``EVAL_FIELDS``): mean and std of the undiscounted episode return, mean
    episode length (steps) and the success rate, read as SB3 does from
    ``info["is_success"]`` at the episode's last step (0 for envs without it).
    """
    shard = NamedSharding(mesh, P("batch") if num_envs % mesh.devices.size == 0 else P())

    def evaluate(actor, normalizer, key):
        state = reset_batch(jax.random.split(key, num_envs))
        state = jax.lax.with_sharding_constraint(state, jax.tree.map(lambda _: shard, state))

        def body(carry, _):
            state, alive, ret, steps, success = carry
            obs = nets.normalize(normalizer, state.obs)
            action = networks.deterministic_action(nets.actor, actor, obs)
            nxt = step_batch(state, action)
            ret = ret + jnp.where(alive, nxt.reward, 0.0)
            steps = steps + alive.astype(jnp.int32)
            # success as SB3 reads it: info["is_success"] at the episode's last step
            is_success = nxt.info.get("is_success", jnp.zeros_like(alive))  # absent in foreign envs
            success = jnp.where(alive, is_success, success)
            alive = alive & (nxt.done <= 0) & ~nxt.info["truncated"]
            return (nxt, alive, ret, steps, success), None

        n = num_envs
        init = (state, jnp.ones((n,), bool), jnp.zeros((n,)), jnp.zeros((n,), jnp.int32), jnp.zeros((n,), bool))
        (_, _, ret, steps, success), _ = jax.lax.scan(body, init, None, length=length)
        return {
            "eval/episode_reward": jnp.mean(ret),
            "eval/episode_reward_std": jnp.std(ret),
            "eval/episode_length": jnp.mean(steps.astype(jnp.float32)),
            "eval/success": jnp.mean(success.astype(jnp.float32)),
        }

    return jax.jit(evaluate)
