"""Same-step autoreset (``bcg_envs.envs.autoreset``): exactly the ended envs (done or
truncated) start a fresh episode from their own rng, the others are kept, skipping the
reset when none ended changes nothing, and the gradient stops at the reset."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg_envs.envs.autoreset import autoreset, episode_ended
from bcg_envs.envs.base import State


def _reset(rng: jax.Array) -> State:
    rng, k = jax.random.split(rng)
    x = jax.random.uniform(k, (3,))
    info = {"rng": rng, "step": jnp.zeros((), jnp.int32), "truncated": jnp.zeros((), bool)}
    return State({"x": x}, x * 2.0, jnp.zeros(()), jnp.zeros(()), {"m": jnp.zeros(())}, info)


reset_batch = jax.vmap(_reset)


def _stepped(done, truncated) -> State:
    """A batch of 5 one step into their episodes, with the given ends."""
    s = reset_batch(jax.random.split(jax.random.PRNGKey(0), 5))
    info = dict(s.info, step=s.info["step"] + 1, truncated=jnp.asarray(truncated))
    return s.replace(data={"x": s.data["x"] + 1.0}, reward=jnp.ones(5), done=jnp.asarray(done, jnp.float32), info=info)


@pytest.mark.parametrize("skip", [False, True], ids=["where", "cond"])
def test_replaces_exactly_the_ended_envs(skip):
    new = _stepped([0, 1, 0, 1, 0], [False, False, False, True, True])
    ended = np.asarray(episode_ended(new))
    np.testing.assert_array_equal(ended, [False, True, False, True, True])
    out = jax.jit(lambda s: autoreset(s, reset_batch, skip_if_none_ended=skip))(new)
    fresh = reset_batch(jax.vmap(lambda k: jax.random.fold_in(k, 1))(new.info["rng"]))
    for o, f, n in zip(jax.tree.leaves(out), jax.tree.leaves(fresh), jax.tree.leaves(new)):
        np.testing.assert_array_equal(np.asarray(o)[ended], np.asarray(f)[ended])
        np.testing.assert_array_equal(np.asarray(o)[~ended], np.asarray(n)[~ended])


@pytest.mark.parametrize("skip", [False, True], ids=["where", "cond"])
def test_nothing_ended_keeps_the_batch(skip):
    new = _stepped([0] * 5, [False] * 5)
    out = autoreset(new, reset_batch, skip_if_none_ended=skip)
    for o, n in zip(jax.tree.leaves(out), jax.tree.leaves(new)):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(n))


@pytest.mark.parametrize("skip", [False, True], ids=["where", "cond"])
def test_gradient_stops_at_the_reset(skip):
    new = _stepped([0, 1, 0, 0, 0], [False, False, True, False, False])

    def total(x):
        return jnp.sum(autoreset(new.replace(data={"x": x}), reset_batch, skip_if_none_ended=skip).data["x"])

    grad = np.asarray(jax.grad(total)(new.data["x"]))
    np.testing.assert_array_equal(grad, np.array([1, 0, 0, 1, 1], np.float32)[:, None] * np.ones(3))
