"""bcg_envs/process_safety.py and fork-safe env construction: envs in worker processes.

Gymnasium's AsyncVectorEnv with its defaults (``fork`` on Linux, after building one env in
the parent to read its spaces) runs: building an env and reading its spaces start no JAX
runtime in the parent. A parent that has started JAX itself gets children that fail at once
with ``ForkedAfterJaxError`` naming what to pass; ``spawn``/``forkserver`` workers and
SB3's ``SubprocVecEnv`` run.

Each case runs in a fresh Python process with a timeout, so that a hang fails the test
instead of blocking the suite.
"""

import pytest

from tests.fresh_process import run_fresh

FIX = 'vector_kwargs={"context": "spawn"}'


_ASYNC_DEFAULTS = """
    import numpy as np, gymnasium as gym, bcg_envs
    from bcg_envs.cpu_runtime import jax_backends_created
    if __name__ == "__main__":
        env = gym.make_vec({env_id!r}, num_envs=2, vectorization_mode="async", backend={backend!r})
        print("parent started jax:", jax_backends_created(), flush=True)
        obs, _ = env.reset(seed=0)
        for _ in range(3):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        env.close()
        print("finished", obs.shape, bool(np.isfinite(obs).all()))
"""


def check_async_defaults_run(tmp_path, env_id: str, backend: str, timeout: float) -> None:
    out = run_fresh(_ASYNC_DEFAULTS.format(env_id=env_id, backend=backend), tmp_path, timeout)
    assert out.returncode == 0, (out.stdout, out.stderr[-3000:])
    assert "parent started jax: False" in out.stdout, out.stdout
    assert out.stdout.split()[-1] == "True" and "(2, " in out.stdout, out.stdout


def test_async_vector_env_runs_with_gymnasium_defaults(tmp_path):
    """The default tier's check: BoxPush on MuJoCo C, Gymnasium's defaults (fork), no hang."""
    check_async_defaults_run(tmp_path, "bcg_envs/BoxPush-v0", "mujoco", timeout=180)


def _all_ids():
    import bcg_envs

    return bcg_envs.list_envs()


def _async_cases():
    """Every id on MuJoCo C; under MJX (each worker compiles the whole env, ~2.5 min for a G1
    id on 2 cores) BoxPush and one G1 id, whose construction the other G1 ids share."""
    ids = _all_ids()
    return [(i, "mujoco") for i in ids] + [(i, "mjx") for i in ids if i.endswith(("BoxPush-v0", "G1Jump-v0"))]


@pytest.mark.integration
@pytest.mark.parametrize("env_id, backend", _async_cases())
def test_async_vector_env_runs_with_gymnasium_defaults_on_every_id(tmp_path, env_id, backend):
    check_async_defaults_run(tmp_path, env_id, backend, timeout=900)


@pytest.mark.integration
def test_async_vector_env_defaults_fail_fast_after_the_parent_started_jax(tmp_path):
    """A parent that computed with JAX before forking its workers: they refuse at once and
    name what to pass, instead of hanging in their first compile."""
    out = run_fresh(
        """
        import time, jax.numpy as jnp, gymnasium as gym, bcg_envs
        jnp.ones(3).block_until_ready()  # the parent starts JAX
        start = time.monotonic()
        try:
            env = gym.make_vec("bcg_envs/BoxPush-v0", num_envs=2, vectorization_mode="async", backend="mujoco")
            env.reset(seed=0)
        except Exception as err:  # the workers died; their ForkedAfterJaxError is on stderr
            print("parent raised", type(err).__name__, round(time.monotonic() - start, 1))
        """,
        tmp_path,
        180,
    )
    assert "parent raised" in out.stdout, (out.stdout, out.stderr[-3000:])
    assert "ForkedAfterJaxError" in out.stderr and FIX in out.stderr, out.stderr[-3000:]


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


@pytest.mark.parametrize("ids", ["BoxPush-v0 PlanarHand-v0", pytest.param("all", marks=pytest.mark.integration)])
def test_building_envs_and_reading_spaces_starts_no_jax_runtime(tmp_path, ids):
    """What Gymnasium's AsyncVectorEnv does in its parent (build an env, read its spaces,
    close it) leaves JAX's runtime unstarted, so forking afterwards is safe; the spaces
    match what a reset returns (checked in tests/test_smoke.py)."""
    if ids == "all":
        ids = " ".join(_all_ids())
    out = run_fresh(
        f"""
        import gymnasium as gym, bcg_envs
        from bcg_envs.cpu_runtime import jax_backends_created
        for env_id in {ids.split()!r}:
            for backend in ("mjx", "mujoco"):
                env = gym.make("bcg_envs/" + env_id.split("/")[-1], backend=backend)
                print(env_id, backend, env.observation_space.shape, env.action_space.shape, env.metadata["render_fps"])
                env.close()
        print("started:", jax_backends_created())
        """,
        tmp_path,
        600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[-1] == "started: False", out.stdout
