"""Process-level helpers."""

from __future__ import annotations

import os


def single_cpu_client() -> None:
    """Create JAX's CPU client while the process sees one CPU, then restore affinity.

    On 2-core machines batched XLA CPU kernels (the vmapped Cholesky of MJX's solver)
    intermittently deadlocked with both worker threads inside the kernel
    (jax-ml/jax#25861); a client created under a one-CPU affinity did not (0 hangs
    in 8 fresh runs). XLA sizes its intra-op pool from the CPUs it sees when the client is
    created, so the client keeps one intra-op thread. The threads the client
    started inherited the one-CPU affinity: every thread of the process gets the full set
    back, or all of them stay on CPU 0, where two processes (two test workers, a test run
    beside a training run) then share one core. No-op where affinity is unsupported.
    """
    import jax

    if not hasattr(os, "sched_getaffinity"):
        jax.devices()
        return
    cpus = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(cpus)})
        jax.devices()
    finally:
        for tid in _thread_ids():
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:  # the thread has exited
                pass


def _thread_ids() -> list:
    """This process's thread ids (Linux ``/proc/self/task``; the main thread alone elsewhere)."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]
