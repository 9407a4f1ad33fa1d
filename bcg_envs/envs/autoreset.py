"""Same-step autoreset of a batch of JAX env states: one definition for the Gymnasium envs
of ``backend="mjx"`` (``bcg_envs.mjx_backend``) and SHAC's rollout loss
(``bcg_envs.learners.shac.losses``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import jax
import jax.numpy as jnp

if TYPE_CHECKING:
    from bcg_envs.envs.base import State


def episode_ended(state: State) -> jax.Array:
    """Which envs of a batch ended their episode this step: ``done`` (terminated, including
    a diverged simulation) or ``info["truncated"]`` (``step >= episode_length``); shape
    ``(num_envs,)``, bool."""
    return (state.done > 0) | state.info["truncated"]


def autoreset(
    state: State,
    reset_batch: Callable[[jax.Array], State],
    *,
    ended: Optional[jax.Array] = None,
    skip_if_none_ended: bool = False,
) -> State:
    """``state`` (leading axis ``num_envs``) with every ended env (``ended``, by default
    ``episode_ended``) replaced by a fresh episode, the others kept as they are.

    ``reset_batch`` is the env's batched reset (``jax.vmap(env.reset)``). An env's fresh
    key is ``fold_in(rng, 1)`` of its own ``info["rng"]``: reproducible from the seed,
    and apart from the keys its step draws. The keys carry no gradient
    (``stop_gradient``), and ``where`` sends a zero cotangent into the ended envs' last
    states: a differentiated rollout's gradient stops at an episode boundary.

    ``skip_if_none_ended`` skips the reset computation (``lax.cond``) in a step where no
    env ended: the same values, less work in a training loop. Under ``jax.vmap`` the
    ``cond`` becomes a select that computes both sides."""
    ended = episode_ended(state) if ended is None else ended

    def reset(s: State) -> State:
        keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(s.info["rng"])
        fresh = reset_batch(jax.lax.stop_gradient(keys))
        return jax.tree.map(lambda a, b: jnp.where(ended.reshape(ended.shape + (1,) * (a.ndim - 1)), a, b), fresh, s)

    if skip_if_none_ended:
        return jax.lax.cond(jnp.any(ended), reset, lambda s: s, state)
    return reset(state)
