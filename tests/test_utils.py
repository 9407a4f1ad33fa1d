"""single_cpu_client: one intra-op XLA thread, and no thread left pinned to one CPU."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/task") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux thread affinity and at least two CPUs",
)

_PROBE = textwrap.dedent(
    """
    import os, sys
    from bcg_envs.utils import single_cpu_client
    cpus = os.sched_getaffinity(0)
    if sys.argv[1] == "workaround":
        single_cpu_client()
    import jax, jax.numpy as jnp
    jax.jit(lambda x: x @ x)(jnp.ones((256, 256))).block_until_ready()
    pinned, eigen = 0, 0
    for tid in os.listdir("/proc/self/task"):
        try:
            pinned += os.sched_getaffinity(int(tid)) != cpus
            eigen += open(f"/proc/self/task/{tid}/comm").read().startswith("tf_XLAEigen")
        except OSError:
            pass
    print(pinned, eigen)
    """
)


def _probe(mode: str):
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=300, check=True)
    pinned, eigen = map(int, out.stdout.split()[-2:])
    return pinned, eigen


def test_client_keeps_one_intra_op_thread_and_frees_every_thread():
    pinned, eigen = _probe("workaround")
    assert pinned == 0, f"{pinned} threads left with a narrower CPU affinity"
    plain_pinned, plain_eigen = _probe("plain")
    # The workaround's point: fewer intra-op threads than a plain client on this machine.
    assert plain_pinned == 0 and eigen == 1 < plain_eigen
