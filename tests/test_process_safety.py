"""bcg_envs/process_safety.py: envs in worker processes. Gymnasium's AsyncVectorEnv with its
defaults (``fork`` on Linux, after building one env in the parent, which starts JAX) fails
at once with ``ForkedAfterJaxError`` naming what to pass; ``spawn``/``forkserver`` workers,
SB3's ``SubprocVecEnv`` and children forked before JAX started run.

Each case runs in a fresh Python process with a timeout, so that a hang fails the test
instead of blocking the suite.
"""

import pytest

from tests.fresh_process import run_fresh

FIX = 'vector_kwargs={"context": "spawn"}'


_ASYNC_DEFAULTS = """
    import time, gymnasium as gym, bcg_envs
    start = time.monotonic()
    try:
        env = gym.make_vec({env_id!r}, num_envs=2, vectorization_mode="async", backend={backend!r})
    except Exception as err:  # the workers died; their ForkedAfterJaxError is on stderr
        print("parent raised", type(err).__name__, round(time.monotonic() - start, 1))
    else:
        env.reset(seed=0)
        env.close()
        print("ran")
"""


def check_async_defaults_fail_fast(tmp_path, env_id: str, backend: str, timeout: float) -> None:
    out = run_fresh(_ASYNC_DEFAULTS.format(env_id=env_id, backend=backend), tmp_path, timeout)
    assert "parent raised" in out.stdout, (out.stdout, out.stderr[-3000:])
    assert "ForkedAfterJaxError" in out.stderr and FIX in out.stderr, out.stderr[-3000:]


def test_async_vector_env_defaults_fail_fast_naming_what_to_pass(tmp_path):
    """The default tier's check: BoxPush on MuJoCo C, Gymnasium's defaults, no hang."""
    check_async_defaults_fail_fast(tmp_path, "bcg_envs/BoxPush-v0", "mujoco", timeout=120)


def _all_ids():
    import bcg_envs

    return bcg_envs.list_envs()


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["mujoco", "mjx"])
@pytest.mark.parametrize("env_id", _all_ids())
def test_async_vector_env_defaults_fail_fast_on_every_id(tmp_path, env_id, backend):
    check_async_defaults_fail_fast(tmp_path, env_id, backend, timeout=600)


@pytest.mark.integration
@pytest.mark.parametrize("backend, context", [("mujoco", "spawn"), ("mjx", "spawn"), ("mujoco", "forkserver")])
def test_async_vector_env_runs_with_the_start_method_named(tmp_path, backend, context):
    out = run_fresh(
        f"""
        import numpy as np, gymnasium as gym, bcg_envs
        if __name__ == "__main__":
            env = gym.make_vec("bcg_envs/BoxPush-v0", num_envs=2, vectorization_mode="async",
                               vector_kwargs={{"context": {context!r}}}, backend={backend!r})
            obs, _ = env.reset(seed=0)
            for _ in range(3):
                obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            env.close()
            print("finished", obs.shape, bool(np.isfinite(obs).all()))
        """,
        tmp_path,
        300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "True" and "(2, " in out.stdout


@pytest.mark.integration
def test_forked_child_runs_before_jax_started_and_fails_fast_after(tmp_path):
    """No false alarm for a child forked before the parent's first JAX computation; a child
    forked after it raises at its first env instead of hanging in its first compile."""
    out = run_fresh(
        """
        import multiprocessing as mp, os
        import bcg_envs, gymnasium as gym, jax.numpy as jnp

        def child():
            try:
                env = gym.make("bcg_envs/BoxPush-v0", backend="mujoco")
                env.reset(seed=0)
                env.step(env.action_space.sample())
                print("child ran", flush=True)
            except bcg_envs.process_safety.ForkedAfterJaxError as err:
                print("child refused:", err, flush=True)
                os._exit(3)

        fork = mp.get_context("fork")
        for label in ("before", "after"):
            if label == "after":
                jnp.ones(3).block_until_ready()  # the parent starts JAX
            p = fork.Process(target=child)
            p.start()
            p.join(240)
            print(label, p.exitcode, flush=True)
        """,
        tmp_path,
        300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[:2] == ["child ran", "before 0"], out.stdout
    assert lines[-1] == "after 3" and FIX in lines[-2], out.stdout


@pytest.mark.integration
def test_sb3_subproc_vec_env_runs(tmp_path):
    """SB3's SubprocVecEnv (``forkserver`` on Linux) with its defaults, after the parent used JAX."""
    pytest.importorskip("stable_baselines3")
    out = run_fresh(
        """
        import numpy as np, jax.numpy as jnp, gymnasium as gym, bcg_envs
        from stable_baselines3.common.vec_env import SubprocVecEnv

        def make():
            import bcg_envs, gymnasium as gym
            return gym.make("bcg_envs/BoxPush-v0", backend="mujoco")

        if __name__ == "__main__":
            jnp.ones(3).block_until_ready()
            env = SubprocVecEnv([make, make])
            obs = env.reset()
            for _ in range(3):
                obs, reward, done, info = env.step(np.stack([env.action_space.sample() for _ in range(2)]))
            env.close()
            print("finished", obs.shape, bool(np.isfinite(obs).all()))
        """,
        tmp_path,
        300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "True", out.stdout
