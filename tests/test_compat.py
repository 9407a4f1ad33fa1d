"""Brax's trainers take ``bcg_envs.make_jax`` envs with no extra call (fresh processes, which
inherit the suite's compile cache settings from tests/conftest.py)."""

from pathlib import Path

import pytest

from tests.fresh_process import fresh_stdout

_ROOT = Path(__file__).resolve().parents[1]


def test_make_jax_restores_what_brax_calls():
    out = fresh_stdout(
        """
        import sys
        import jax
        import bcg_envs
        assert "bcg_envs.compat" not in sys.modules or not sys.modules["bcg_envs.compat"]._brax_done
        names = ("device_put_replicated", "device_put_sharded")
        missing = [n for n in names if n not in vars(jax)]  # what jax turned into errors
        env = bcg_envs.make_jax("BoxPush-v0")
        x = jax.device_put_replicated(jax.numpy.ones(3), jax.local_devices())
        y = jax.device_put_sharded([jax.numpy.ones(3)], jax.local_devices())
        assert x.shape == (1, 3) and y.shape == (1, 3)
        from bcg_envs.compat import enable_brax
        before = jax.device_put_replicated
        assert enable_brax() == missing  # the names make_jax re-exposed, only the missing ones
        assert enable_brax() == missing and jax.device_put_replicated is before  # again: a no-op
        print("ok")
        """,
        _ROOT,
        300,
    )
    assert out.strip().endswith("ok")


@pytest.mark.long
def test_brax_ppo_trains_on_make_jax_env_without_compat_call():
    """A tiny ``brax.training.agents.ppo.train`` run; the script never touches bcg_envs.compat."""
    out = fresh_stdout(
        """
        import math
        from brax.training.agents.ppo import train as ppo
        import bcg_envs
        env = bcg_envs.make_jax("BoxPush-v0")
        _, _, metrics = ppo.train(environment=env, num_timesteps=64, episode_length=8, num_envs=4, batch_size=4,
                                  num_minibatches=2, unroll_length=4, num_updates_per_batch=1, num_evals=2,
                                  num_eval_envs=4, seed=0)
        assert math.isfinite(float(metrics["eval/episode_reward"])), metrics
        print("ok")
        """,
        _ROOT,
        900,
    )
    assert out.strip().endswith("ok")


def test_brax_training_wrapper_starts_every_episode_afresh(make_toy_env):
    """Under ``wrap_env_fn=brax_training_wrapper`` an ended env gets ``env.reset`` at a new
    key (a new start, the episode's step counter at 0), while Brax's episode bookkeeping
    (``steps``, ``truncation``) carries on; Brax's own autoreset would restore the first
    state and keep counting the env's steps. On the ball toy (no gravity, zero action) the
    ball rests where its episode drew it, so the observation names the episode."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bcg_envs.compat import brax_training_wrapper
    from tests.ball_wall import XML as BALL_XML

    env = make_toy_env(
        BALL_XML,
        ctrl_dt=0.01,
        initial_state=lambda key: (jax.random.uniform(key, (1,), minval=-0.5, maxval=0.0), jnp.zeros(1)),
        force_threshold=0.0,
        estimator="exact",
    )
    wrapped = brax_training_wrapper(env, episode_length=3)
    state = jax.jit(wrapped.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    step = jax.jit(wrapped.step)
    starts, counters, truncation = [np.asarray(state.obs)], [], []
    for _ in range(6):
        state = step(state, jnp.zeros((2, env.action_size)))
        starts.append(np.asarray(state.obs))
        counters.append(np.asarray(state.info["step"]).tolist())
        truncation.append(np.asarray(state.info["truncation"]).tolist())
    assert counters == [[1, 1], [2, 2], [0, 0], [1, 1], [2, 2], [0, 0]]  # the env's own counter restarts
    assert truncation == [[0, 0], [0, 0], [1, 1], [0, 0], [0, 0], [1, 1]]  # Brax's time limit, as before
    np.testing.assert_array_equal(starts[2], starts[0])  # the ball rests within an episode
    assert not np.allclose(starts[3], starts[0]) and not np.allclose(starts[6], starts[3])  # a new draw per episode
    assert not np.allclose(starts[0][0], starts[0][1])  # and per env
