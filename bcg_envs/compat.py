"""Compatibility shims for third-party trainers on the pinned JAX."""

from __future__ import annotations

from typing import Any, Callable, List, Optional

#: Names re-exposed on the ``jax`` module by ``enable_brax`` (empty until it has run).
_BRAX_SHIMMED: List[str] = []
_brax_done = False


def enable_brax() -> List[str]:
    """Let Brax 0.14.2's trainers run on jax 0.10; returns the names it re-exposed.

    Brax 0.14.2 (the newest release) still calls ``jax.device_put_replicated`` and
    ``jax.device_put_sharded``, which jax 0.10 turned into errors although their
    implementations remain in ``jax._src.api``. This re-exposes only those that are
    missing; it changes nothing else. ``bcg_envs.make_jax`` calls it, so users need not;
    calling it again is a no-op.
    """
    global _brax_done
    if _brax_done:
        return list(_BRAX_SHIMMED)
    import jax
    from jax._src import api

    for name in ("device_put_replicated", "device_put_sharded"):
        if name not in vars(jax) and hasattr(api, name):
            setattr(jax, name, getattr(api, name))
            _BRAX_SHIMMED.append(name)
    _brax_done = True
    return list(_BRAX_SHIMMED)


def brax_training_wrapper(
    env: Any, episode_length: int = 1000, action_repeat: int = 1, randomization_fn: Optional[Callable] = None
) -> Any:
    """Brax's training wrappers with an autoreset that starts every episode afresh: pass it
    as ``wrap_env_fn=`` to a Brax trainer (``brax.training.agents.ppo.train``).

    Brax's ``AutoResetWrapper`` restores each env's first state and observation instead of
    calling ``reset``, and leaves the env's ``info`` as the last episode ended it. On these
    tasks that trains on ``num_envs`` start states for the whole run (BoxPush's box, goal
    and pusher, PlanarHand's target, G1's push and randomization are drawn once), and on
    G1 the episode's step counter, which indexes the reference clip, keeps counting. This
    wrapper keeps Brax's vmap and ``EpisodeWrapper`` (``steps``, ``truncation``, episode
    metrics) and replaces each ended env's state by ``env.reset`` at a fresh key through
    the autoreset SHAC and the Gymnasium envs use (``bcg_envs.envs.autoreset``), so every
    episode draws its own start. The reset runs only at steps where some env ended.
    """
    import jax.numpy as jnp
    from brax.envs.wrappers import training

    from bcg_envs.envs.autoreset import autoreset

    if randomization_fn is None:
        batched = training.VmapWrapper(env)
    else:
        batched = training.DomainRandomizationVmapWrapper(env, randomization_fn)

    class FreshAutoReset(training.Wrapper):
        def step(self, state, action):
            if "steps" in state.info:  # EpisodeWrapper counts from 0 again after an ended episode
                steps = state.info["steps"]
                state.info.update(steps=jnp.where(state.done, jnp.zeros_like(steps), steps))
            state = self.env.step(state.replace(done=jnp.zeros_like(state.done)), action)

            def fresh_starts(keys):  # this step's reward, done and Brax's episode keys stay
                fresh = batched.reset(keys)
                episode_info = {k: v for k, v in state.info.items() if k not in fresh.info}
                return fresh.replace(
                    info={**fresh.info, **episode_info}, reward=state.reward, done=state.done, metrics=state.metrics
                )

            return autoreset(state, fresh_starts, ended=state.done > 0, skip_if_none_ended=True)

    return FreshAutoReset(training.EpisodeWrapper(batched, episode_length, action_repeat))
