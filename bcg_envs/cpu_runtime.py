"""JAX's CPU runtime made safe for batched contact solves: one intra-op thread, a watchdog
that turns a hung wait into an error, and the one-CPU check of the bcg step.

Why. XLA's CPU client runs batched LAPACK kernels (the vmapped Cholesky and triangular
solves of MJX's constraint solver) on its intra-op thread pool, and those kernels split
their batch onto the same pool and block until the pieces finish. When every pool thread
is inside such a kernel, nothing is left to run the pieces: the process waits forever at
0 % CPU (jax-ml/jax#25861; seen here on 2 cores with 64 envs looping every estimator's
batched ``grad_step``, and reported elsewhere with a pool of 4). A pool of one thread runs
each kernel's pieces inline and cannot deadlock this way.

What. ``import bcg_envs`` calls ``install()``, which wraps JAX's ``"cpu"`` backend factory
so that, whenever JAX creates its CPU client (lazily, on first use), the creating thread
sees one CPU: XLA sizes its intra-op pool from the CPUs it sees, so the pool gets one
thread; every thread's full affinity is restored right after, so nothing stays pinned.
Set ``BCG_ENVS_CPU_THREADS=auto`` before the first JAX computation to keep XLA's own pool
(one thread per CPU) instead. Measured cost: docs/performance.md.

If JAX created its CPU client before ``import bcg_envs`` (a JAX computation ran first),
the pool cannot be changed any more; ``install()`` then warns, and ``wait_ready`` (used by
the Gymnasium envs before reading results) raises ``SimulationHangError`` after
``BCG_ENVS_HANG_TIMEOUT`` seconds (default 600) instead of waiting forever.

Also here: ``mlir_single_threaded``, which tells the bcg step to avoid a program form that
XLA mis-converts when JAX was imported in a one-CPU process.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Callable, List

#: Environment variable choosing the CPU client's intra-op pool: ``1`` (default) or ``auto``.
THREADS_VAR = "BCG_ENVS_CPU_THREADS"

#: Environment variable: seconds a Gymnasium env waits for a step's results before raising.
HANG_TIMEOUT_VAR = "BCG_ENVS_HANG_TIMEOUT"

#: Default of ``BCG_ENVS_HANG_TIMEOUT``, seconds: far above any step's compute (a batched
#: G1 ``grad_step`` takes well under a second once compiled; compiling happens before the wait).
DEFAULT_HANG_TIMEOUT = 600.0


class SimulationHangError(RuntimeError):
    """A step's results did not arrive within ``BCG_ENVS_HANG_TIMEOUT`` seconds."""


def one_thread_wanted() -> bool:
    """Whether the CPU client should get one intra-op thread (``BCG_ENVS_CPU_THREADS``)."""
    value = os.environ.get(THREADS_VAR, "1").strip().lower()
    if value not in ("1", "auto"):
        raise ValueError(f"{THREADS_VAR} must be '1' or 'auto', got {value!r}")
    return value == "1"


def _thread_ids() -> List[int]:
    """This process's thread ids (Linux ``/proc/self/task``; the calling thread elsewhere)."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def call_seeing_one_cpu(make: Callable[[], Any]) -> Any:
    """``make()`` while the calling thread sees one CPU; afterwards every thread of the
    process (those ``make`` started included) gets the original CPU set back. Plain
    ``make()`` where thread affinity is unsupported."""
    if not hasattr(os, "sched_getaffinity"):
        return make()
    cpus = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(cpus)})
        return make()
    finally:
        for tid in _thread_ids():
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:  # the thread has exited
                pass


def jax_backends_created() -> bool:
    """Whether JAX has created its clients (CPU and any accelerator) in this process: they
    are made lazily, by the first computation or device query, and start XLA's threads."""
    from jax._src import xla_bridge  # no public query exists in jax 0.10

    return xla_bridge.backends_are_initialized()


_installed = False


def install() -> bool:
    """Make JAX's CPU client (when JAX creates it) one with a single intra-op thread.

    Returns True where the factory was wrapped (or already is), False where the user opted
    out or the client already exists (then a ``RuntimeWarning`` says what it means)."""
    global _installed
    if _installed:
        return True
    if not one_thread_wanted():
        return False
    if jax_backends_created():
        warnings.warn(
            "JAX created its CPU client before bcg_envs was imported, so its intra-op pool keeps one "
            "thread per CPU, where batched contact solves can deadlock (jax-ml/jax#25861). Import "
            f"bcg_envs before running any JAX computation, or set {THREADS_VAR}=auto to silence this.",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    from jax._src import xla_bridge
    from jax.extend.backend import register_backend_factory

    registration = xla_bridge._backend_factories["cpu"]

    def make_cpu_client():
        return call_seeing_one_cpu(registration.factory)

    register_backend_factory(
        "cpu", make_cpu_client, priority=registration.priority, fail_quietly=registration.fail_quietly
    )
    _installed = True
    return True


def mlir_single_threaded() -> bool:
    """Whether JAX's MLIR thread pool has one thread: JAX was imported in a process that
    could use one CPU (``taskset -c 0``, a one-core cluster job). XLA's conversion of some
    programs to HLO then drops the typed-FFI attributes of their LAPACK calls (measured with
    jaxlib 0.10.2; docs/performance.md, "Processes restricted to one CPU"). Where JAX does
    not expose its pool, the CPUs the process may use now decide."""
    try:
        from jax._src.interpreters import mlir

        return mlir.global_thread_pool.get_max_concurrency() <= 1
    except (ImportError, AttributeError):
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        return len(cpus) <= 1


def hang_timeout() -> float:
    """``BCG_ENVS_HANG_TIMEOUT`` in seconds (default ``DEFAULT_HANG_TIMEOUT``)."""
    raw = os.environ.get(HANG_TIMEOUT_VAR)
    if raw is None:
        return DEFAULT_HANG_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{HANG_TIMEOUT_VAR} must be a positive number of seconds, got {raw!r}")
    return value


#: The most one poll of ``wait_ready`` counts toward its timeout (s); a longer poll means the
#: process was suspended.
SUSPENDED_POLL_S = 1.0


def wait_ready(tree: Any, timeout: float | None = None) -> Any:
    """Wait until every JAX array in ``tree`` is computed, polling; raise
    ``SimulationHangError`` after ``timeout`` seconds (``hang_timeout()`` if None) of
    waiting while the process runs (time suspended does not count).

    Polling (``Array.is_ready``) keeps the calling thread free to give up, which a blocking
    wait inside XLA does not."""
    import jax

    leaves = [x for x in jax.tree.leaves(tree) if hasattr(x, "is_ready")]  # jax.Array and its kin
    pending = [x for x in leaves if not x.is_ready()]
    if not pending:
        return tree
    limit = hang_timeout() if timeout is None else timeout
    waited, last = 0.0, time.monotonic()
    pause = 1e-5
    while pending:
        if waited > limit:
            raise SimulationHangError(
                f"the simulation's results did not arrive within {limit:g} s: XLA's CPU threads are most "
                "likely deadlocked inside a batched linear-algebra kernel (jax-ml/jax#25861). This happens "
                "when JAX's CPU client was created with several intra-op threads: import bcg_envs before "
                f"any JAX computation and leave {THREADS_VAR} unset (or 1). Raise {HANG_TIMEOUT_VAR} "
                "if a single step legitimately takes longer."
            )
        time.sleep(pause)
        now = time.monotonic()
        # A poll far longer than its sleep is time the process did not run (suspended with
        # Ctrl-Z or SIGSTOP, then resumed), not time the simulation took: count at most
        # SUSPENDED_POLL_S of it, so a resumed run goes on instead of reporting a hang.
        waited += min(now - last, pause + SUSPENDED_POLL_S)
        last = now
        pause = min(pause * 2, 0.01)
        pending = [x for x in pending if not x.is_ready()]
    return tree
