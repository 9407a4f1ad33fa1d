"""SHAC over several processes (``jax.distributed``): the argument checks (default tier,
no processes launched) and a 2-process run on localhost CPU against a 1-process run
(integration tier).

The 2-process run: each worker (a subprocess) calls ``jax.distributed.initialize`` with
one CPU device of its own, so the global mesh has 2 devices in 2 processes and XLA's
cross-process collectives (Gloo, JAX's CPU default) average the gradients. The same
``train`` call with the same seed and total envs on 1 device in this process is the
reference.
"""

from __future__ import annotations

import inspect
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import flax.serialization
import jax
import numpy as np
import pytest

from bcg_envs.learners import shac

#: The toy run both sides train: 8 envs x 8 steps, 6 iterations, small nets.
KW = dict(
    num_envs=8,
    horizon=8,
    num_timesteps=6 * 64,
    actor_hidden=(32, 32),
    critic_hidden=(32, 32),
    num_evals=2,
    num_eval_envs=8,
    seed=1,
    progress_bar=False,
)

#: Seconds a worker may take (compiles included; ~30-60 s on 2 busy cores) before the
#: test kills both and fails: a hung collective must not hang the suite.
WORKER_TIMEOUT = 420

_WORKER = textwrap.dedent(
    """
    import importlib.util, json, sys
    from pathlib import Path
    pid, nproc, port, work, env_file, env_name = sys.argv[1:7]
    pid, nproc, work = int(pid), int(nproc), Path(work)
    import bcg_envs  # noqa: F401  (first: the one-thread CPU client, created with distributed options)
    import jax
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=nproc, process_id=pid)
    import numpy as np
    from bcg_envs import cpu_runtime
    from bcg_envs.learners import shac
    assert cpu_runtime.install(), "the one-thread CPU client factory is not in place"
    assert jax.process_count() == nproc and len(jax.local_devices()) == 1, jax.devices()
    spec = importlib.util.spec_from_file_location("shac_test_env", env_file)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    env = getattr(mod, env_name)()
    kw = json.loads(sys.argv[7])
    try:  # an uneven split is refused before anything compiles
        shac.train(env, **dict(kw, num_envs=kw["num_envs"] + 1))
        raise SystemExit("num_envs not divisible by the process count was accepted")
    except ValueError as err:
        assert "number of processes" in str(err), err
    cache = shac.ProgramCache()
    _, full, metrics = shac.train(env, checkpoint_dir=work / f"ckpt{pid}", checkpoint_every=2,
                                  log_dir=work / f"log{pid}", program_cache=cache, **kw)
    _, resumed, _ = shac.train(env, restore_from=work / "ckpt0" / "shac_00000002.msgpack",
                               program_cache=cache, **kw)
    np.savez(work / f"full{pid}.npz", *[np.asarray(x) for x in jax.tree.leaves(full)])
    np.savez(work / f"resumed{pid}.npz", *[np.asarray(x) for x in jax.tree.leaves(resumed)])
    metrics.pop("training/walltime")
    (work / f"metrics{pid}.json").write_text(json.dumps(metrics))
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _relative_deviation(x, y):
    """Largest ``|y - x|`` over ``x``'s scale (its largest magnitude)."""
    return float(np.max(np.abs(y - x))) / (float(np.max(np.abs(x))) + 1e-6)


def _checkpoint_leaves(path):
    leaves = flax.serialization.msgpack_restore(path.read_bytes())["leaves"]
    return [np.asarray(leaves[str(i)]) for i in range(len(leaves))]


def _npz_leaves(path):
    data = np.load(path)
    return [data[f"arr_{i}"] for i in range(len(data.files))]


# ----- default tier: the argument checks -----------------------------------------------------
def _devices(*process_indices):
    return [SimpleNamespace(process_index=p) for p in process_indices]


def test_env_split_checks():
    shac.check_env_split(8, _devices(0, 1), process_count=2)
    shac.check_env_split(8, _devices(0, 0, 1, 1), process_count=2)
    shac.check_env_split(3, _devices(0), process_count=1)
    with pytest.raises(ValueError, match=r"num_envs \(9\) must be a multiple of the number of processes \(2\)"):
        shac.check_env_split(9, _devices(0, 1), process_count=2)
    with pytest.raises(ValueError, match="devices of every process"):
        shac.check_env_split(8, _devices(0, 0), process_count=2)
    with pytest.raises(ValueError, match="same number of devices of every process"):
        shac.check_env_split(8, _devices(0, 0, 1, 1, 1, 1, 0, 1), process_count=2)
    with pytest.raises(ValueError, match=r"num_envs \(6\) must be a multiple of the number of devices \(4\)"):
        shac.check_env_split(6, _devices(0, 0, 1, 1), process_count=2)


def test_train_refuses_uneven_process_split(point_mass, monkeypatch):
    # train asks JAX for the process count: a fake count of 2 reaches the checks without
    # launching processes, and the error comes before anything compiles.
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    with pytest.raises(ValueError, match=r"num_envs \(3\) must be a multiple of the number of processes \(2\)"):
        shac.train(point_mass, **dict(KW, num_envs=3))
    with pytest.raises(ValueError, match="devices of every process"):
        shac.train(point_mass, **KW)  # this process's devices are all of process 0


# ----- integration tier: 2 processes on localhost ----------------------------------------------
@pytest.mark.integration
def test_two_processes_match_one(point_mass, tmp_path):
    env_file = inspect.getfile(type(point_mass))
    sub_env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")}
    sub_env["JAX_PLATFORMS"] = "cpu"
    port = _free_port()
    t0 = time.time()
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                str(pid),
                "2",
                str(port),
                str(tmp_path),
                env_file,
                "PointMass",
                json.dumps(KW),
            ],
            env=sub_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for pid in range(2)
    ]
    try:
        # The reference trains here meanwhile: 1 process, 1 device, same seed and total envs.
        _, one, one_metrics = shac.train(
            point_mass, devices=jax.devices()[:1], checkpoint_dir=tmp_path / "one", checkpoint_every=6, **KW
        )
        logs = [w.communicate(timeout=max(WORKER_TIMEOUT - (time.time() - t0), 1))[0] for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    for pid, (w, log) in enumerate(zip(workers, logs)):
        assert w.returncode == 0, f"worker {pid} failed:\n{log[-3000:]}"
    print(f"2 workers + 1-process reference: {time.time() - t0:.0f} s")

    full = [_npz_leaves(tmp_path / f"full{pid}.npz") for pid in range(2)]
    # Both processes hold the same parameters, bit for bit: each computes the replicated
    # values from the same all-reduced gradients with the same program.
    for a, b in zip(*full):
        np.testing.assert_array_equal(a, b)
    metrics = [json.loads((tmp_path / f"metrics{pid}.json").read_text()) for pid in range(2)]
    assert metrics[0] == metrics[1]
    assert metrics[0]["num_steps"] == one_metrics["num_steps"]

    # Against 1 process: the same global program (each env keeps its key, the parameter
    # init is the same), but sums over envs (actor loss, critic minibatch means, the
    # normalizer's moments) are split into per-process partial sums and all-reduced, so
    # float32 rounding differs (~1e-7 relative per sum); 6 iterations of Adam carry that
    # along. 1e-4 of each array's scale is far above it and far below a real difference
    # (another env split or key stream moves the parameters by 1e-2 or more).
    reference = _leaves(one)
    assert len(reference) == len(full[0])
    worst = 0.0
    for x, y in zip(reference, full[0]):
        assert x.shape == y.shape
        worst = max(worst, _relative_deviation(x, y))
    print(f"1 vs 2 processes: largest deviation / array scale = {worst:.2e}")
    assert worst < 1e-4
    # The whole final state (process 0's checkpoint gathers every process's envs) is the
    # 1-process one: the same env per index, with its own random key (integer leaves:
    # keys, step counters, iteration, equal), floats within the same tolerance.
    two_state = _checkpoint_leaves(tmp_path / "ckpt0" / "shac_00000006.msgpack")
    one_state = _checkpoint_leaves(tmp_path / "one" / "shac_00000006.msgpack")
    assert len(two_state) == len(one_state)
    for x, y in zip(one_state, two_state):
        assert x.shape == y.shape and x.dtype == y.dtype
        if np.issubdtype(x.dtype, np.floating):
            assert _relative_deviation(x, y) < 1e-4
        else:
            np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(metrics[0]["eval/episode_reward"], one_metrics["eval/episode_reward"], rtol=1e-3)

    # Process 0 alone wrote checkpoints and the log; both resumed from its checkpoint
    # (which holds every process's envs) and reproduced the uninterrupted run.
    assert sorted(p.name for p in (tmp_path / "ckpt0").glob("shac_*.msgpack")) == [
        "shac_00000002.msgpack",
        "shac_00000004.msgpack",
        "shac_00000006.msgpack",
    ]
    assert (tmp_path / "log0" / "progress.csv").exists()
    assert not (tmp_path / "ckpt1").exists() and not (tmp_path / "log1").exists()
    for pid in range(2):
        for a, b in zip(full[pid], _npz_leaves(tmp_path / f"resumed{pid}.npz")):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
