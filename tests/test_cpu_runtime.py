"""bcg_envs/cpu_runtime.py: the CPU client that cannot deadlock in batched solves, and the
watchdog that turns a hung wait into an error.

The loops run in fresh Python processes started outside the test directory, so that
nothing the test suite sets up (its conftest, an earlier test's JAX client) can hide a
hang: they see exactly what a user's script sees.
"""

import os
import textwrap

import pytest

from tests.fresh_process import fresh_stdout

LINUX_AFFINITY = os.path.isdir("/proc/self/task") and len(os.sched_getaffinity(0)) >= 2


_THREADS_PROBE = """
    import os, warnings
    warnings.simplefilter("error")  # no warning expected on this path
    cpus = os.sched_getaffinity(0)
    import bcg_envs, jax, jax.numpy as jnp
    jax.jit(lambda x: x @ x)(jnp.ones((256, 256))).block_until_ready()
    pinned = eigen = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            pinned += os.sched_getaffinity(int(tid)) != cpus
            eigen += open(f"/proc/self/task/{tid}/comm").read().startswith("tf_XLAEigen")
        except OSError:
            pass
    print(pinned, eigen)
"""


@pytest.mark.skipif(not LINUX_AFFINITY, reason="needs Linux thread affinity and at least two CPUs")
def test_import_gives_one_intra_op_thread_and_leaves_no_thread_pinned(tmp_path):
    pinned, eigen = map(int, fresh_stdout(_THREADS_PROBE, tmp_path, 300).split()[-2:])
    assert pinned == 0, f"{pinned} threads left with a narrower CPU affinity"
    assert eigen == 1
    auto_pinned, auto_eigen = map(
        int, fresh_stdout(_THREADS_PROBE, tmp_path, 300, env={"BCG_ENVS_CPU_THREADS": "auto"}).split()[-2:]
    )
    assert auto_pinned == 0 and auto_eigen > 1  # the opt-out keeps XLA's own pool


@pytest.mark.skipif(not LINUX_AFFINITY, reason="needs Linux thread affinity and at least two CPUs")
def test_mlir_single_threaded_follows_the_cpus_seen_when_jax_is_imported(tmp_path):
    """One CPU at ``import jax`` gives JAX a one-thread MLIR pool for the process's life;
    restricting the CPUs after the import does not."""
    probe = """
        import os
        first = min(os.sched_getaffinity(0))
        if {pin_before}:
            os.sched_setaffinity(0, {{first}})
        import jax
        os.sched_setaffinity(0, {{first}})
        from bcg_envs.cpu_runtime import mlir_single_threaded
        print(mlir_single_threaded())
    """
    assert fresh_stdout(probe.format(pin_before=True), tmp_path, 300).split()[-1] == "True"
    assert fresh_stdout(probe.format(pin_before=False), tmp_path, 300).split()[-1] == "False"


def test_import_after_a_jax_computation_warns_and_names_the_fix(tmp_path):
    out = fresh_stdout(
        """
        import warnings
        import jax.numpy as jnp
        jnp.ones(3).block_until_ready()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import bcg_envs
        print([str(w.message) for w in caught if "CPU client" in str(w.message)])
        """,
        tmp_path,
        300,
    )
    assert "Import bcg_envs before running any JAX computation" in out


def test_bad_thread_setting_is_named(tmp_path, monkeypatch):
    from bcg_envs import cpu_runtime

    monkeypatch.setenv("BCG_ENVS_CPU_THREADS", "4")
    with pytest.raises(ValueError, match="BCG_ENVS_CPU_THREADS must be '1' or 'auto'"):
        cpu_runtime.one_thread_wanted()
    monkeypatch.setenv("BCG_ENVS_HANG_TIMEOUT", "-3")
    with pytest.raises(ValueError, match="BCG_ENVS_HANG_TIMEOUT must be a positive number"):
        cpu_runtime.hang_timeout()


def test_wait_ready_raises_instead_of_waiting_forever():
    import time

    import jax.numpy as jnp

    from bcg_envs.cpu_runtime import SimulationHangError, wait_ready

    class NeverReady:  # stands for a result whose computation never finishes
        def is_ready(self):
            return False

    start = time.monotonic()
    with pytest.raises(SimulationHangError, match="BCG_ENVS_HANG_TIMEOUT"):
        wait_ready({"a": NeverReady()}, timeout=0.3)
    assert 0.3 <= time.monotonic() - start < 5.0
    done = jnp.ones(3) * 2
    assert wait_ready({"x": done}, timeout=0.3)["x"] is done  # a computed result passes through


def test_wait_ready_does_not_count_time_the_process_was_suspended(monkeypatch):
    """A run suspended for an hour (Ctrl-Z, SIGSTOP) mid-wait and resumed goes on: the one
    poll that spans the suspension counts at most ``SUSPENDED_POLL_S``."""
    from bcg_envs import cpu_runtime

    class Clock:  # the process's monotonic clock: the first sleep spans a one-hour suspension
        now, sleeps = 0.0, 0

        def monotonic(self):
            return self.now

        def sleep(self, seconds):
            self.sleeps += 1
            self.now += seconds + (3600.0 if self.sleeps == 1 else 0.0)

    class ReadyAfterPolls:  # a result that arrives on the 20th poll
        polls = 0

        def is_ready(self):
            self.polls += 1
            return self.polls > 20

    clock = Clock()
    monkeypatch.setattr(cpu_runtime, "time", clock)
    result = {"a": ReadyAfterPolls()}
    assert cpu_runtime.wait_ready(result, timeout=2.0) is result and clock.now > 3600.0

    class NeverReady:
        def is_ready(self):
            return False

    clock.sleeps = 1  # no suspension: polls count in full and the wait gives up
    with pytest.raises(cpu_runtime.SimulationHangError):
        cpu_runtime.wait_ready({"a": NeverReady()}, timeout=2.0)


_USER_LOOP = """
    import sys, numpy as np, gymnasium as gym, bcg_envs
    env_id, num_envs, loops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if num_envs:
        env = gym.make_vec(f"bcg_envs/{env_id}", num_envs=num_envs)
    else:
        env = gym.make(f"bcg_envs/{env_id}")
    env.reset(seed=0)
    for k in range(loops):
        a = env.action_space.sample()
        for e in ["exact", "bundle", "zeroth", "bcg", "alpha"]:
            out = env.unwrapped.grad_step(a, estimator=e) if not num_envs else env.grad_step(a, estimator=e)
            assert all(np.isfinite(j).all() for j in out.jacobians), e
    print("finished")
"""


def run_user_loop(tmp_path, env_id: str, num_envs: int, loops: int, timeout: float) -> None:
    """A user's script (no conftest, no set-up call): every estimator's ``grad_step`` in a loop."""
    code = textwrap.dedent(_USER_LOOP).replace(
        "sys.argv[1], int(sys.argv[2]), int(sys.argv[3])", f"{env_id!r}, {num_envs}, {loops}"
    )
    assert fresh_stdout(code, tmp_path, timeout).strip().endswith("finished")


def test_batched_steps_finish_in_a_users_process(tmp_path):
    """The cheap form of the loops below: 64 vmapped BoxPush steps (MJX's batched Cholesky
    solve, the kernel class that deadlocked) for 50 control steps, in a user's process.
    Episodes of 4 steps (autoresets in the loop) make the program tests/test_gym.py's vector
    env compiles, which the compile cache then shares."""
    out = fresh_stdout(
        """
        import numpy as np, gymnasium as gym, bcg_envs
        env = gym.make_vec("bcg_envs/BoxPush-v0", num_envs=64, vectorization_mode="vector_entry_point",
                           config={"episode_length": 4})
        env.reset(seed=0)
        for _ in range(50):
            obs, *_ = env.step(env.action_space.sample())
        print("finished", bool(np.isfinite(obs).all()))
        """,
        tmp_path,
        600,
    )
    assert out.split()[-2:] == ["finished", "True"]


@pytest.mark.integration
@pytest.mark.parametrize(
    "env_id, num_envs",
    [
        ("BoxPush-v0", 64),
        # ~10 min each on 2 cores, mostly compiles of the same kernels: the long tier
        pytest.param("PlanarHand-v0", 64, marks=pytest.mark.long),
        pytest.param("BoxPush-v0", 0, marks=pytest.mark.long),
        pytest.param("PlanarHand-v0", 0, marks=pytest.mark.long),
    ],
)
def test_users_grad_step_loop_finishes(tmp_path, env_id, num_envs):
    run_user_loop(tmp_path, env_id, num_envs=num_envs, loops=16, timeout=900)


@pytest.mark.long
def test_hundreds_of_batched_grad_steps_finish(tmp_path):
    run_user_loop(tmp_path, "BoxPush-v0", num_envs=64, loops=80, timeout=1200)  # 400 batched calls
