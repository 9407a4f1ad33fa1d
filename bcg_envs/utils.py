"""Process-level helpers."""

from __future__ import annotations

import os


def single_cpu_client() -> None:
    """Create JAX's CPU client while the process sees one CPU, then restore affinity.

    On 2-core machines batched XLA CPU kernels (the vmapped Cholesky of MJX's solver)
    intermittently deadlocked with both worker threads inside the kernel
    (jax-ml/jax#25861); a client created under a one-CPU affinity did not (DESIGN.md
    section 4: 0/8 hangs, ~10% slower). No-op where affinity is unsupported.
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
        os.sched_setaffinity(0, cpus)
