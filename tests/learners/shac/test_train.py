"""SHAC training (``bcg_envs.learners.shac.train``): learning on BoxPush, exact resume,
multi-device sharding, NaN gradients, and the run folders of ``learners.runs``.

Compiles dominate the cost on CPU, so the BoxPush tests share one configuration
(``BOXPUSH``) and one ``shac.ProgramCache`` (``programs``): the scalar
hyper-parameters and budget are runtime arguments of the compiled iteration, so every
BoxPush test after the first reuses the same compiled function. The ``runs`` end-to-end
test lives here, not in a ``test_runs.py``, for that reason: in another file it could run
on the other xdist worker (``--dist loadfile``) and compile the BoxPush program again.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg_envs.learners import runs, shac
from tests.learners.shac.conftest import PointMass

#: The BoxPush task settings of ``train_run`` (16 envs x 16 steps, [64, 64] nets, gamma
#: 0.95, actor lr 2e-3), shared by the BoxPush tests (see module docstring). Exact
#: gradients: a BCG training program takes minutes more to compile (its batched rule is
#: tested in tests/gradients/test_differentiable_step.py; SHAC with bcg in the integration
#: baseline smoke test).
BOXPUSH = dict(runs.TASK_DEFAULTS["BoxPush-v0"], estimator="exact", num_eval_envs=16, progress_bar=False)
ITER_STEPS = BOXPUSH["num_envs"] * BOXPUSH["horizon"]


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _assert_trees_close(a, b, rtol, atol):
    la, lb = _leaves(a), _leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


@pytest.fixture(scope="module")
def boxpush():
    return shac.make_env("BoxPush-v0")


@pytest.fixture(scope="module")
def programs():
    """The compiled programs the BoxPush tests share (see module docstring)."""
    return shac.ProgramCache()


# ----- a test double whose backward pass is NaN at some steps ---------------------------------
@jax.custom_vjp
def _poison(action, flag):
    return action


def _poison_fwd(action, flag):
    return action, flag


def _poison_bwd(flag, g):
    return jnp.where(flag, jnp.nan, g), None


_poison.defvjp(_poison_fwd, _poison_bwd)


class NaNGradient:
    """Wraps an env; the step's backward pass returns NaN cotangents for the action at
    the episode steps in ``steps`` (so only some training iterations see them)."""

    def __init__(self, env, steps=(3,)):
        self.env = env
        self.steps = jnp.asarray(steps, jnp.int32)
        self.episode_length = env.episode_length
        self.observation_size = env.observation_size
        self.action_size = env.action_size

    def reset(self, rng):
        return self.env.reset(rng)

    def step(self, state, action):
        flag = jnp.any(state.info["step"] == self.steps)
        return self.env.step(state, _poison(action, flag))


# ----- tests --------------------------------------------------------------------------------
@pytest.mark.integration
def test_boxpush_learns(boxpush, programs):
    history = []
    t0 = time.time()
    make_policy, params, metrics = shac.train(
        boxpush,
        num_timesteps=40 * ITER_STEPS,
        num_evals=2,
        seed=0,
        progress_fn=lambda step, m: history.append((step, m["eval/episode_reward"])),
        program_cache=programs,
        **BOXPUSH,
    )
    initial, final = history[0][1], history[-1][1]
    print(f"BoxPush SHAC eval return: initial {initial:.1f} -> final {final:.1f} ({time.time() - t0:.0f} s)")
    assert history[0][0] == 0 and history[-1][0] == metrics["num_steps"] == 40 * ITER_STEPS
    assert final > initial + 15.0
    assert metrics["skipped_updates"] == 0
    # the returned policy is usable on its own
    obs = jax.random.normal(jax.random.PRNGKey(0), (3, boxpush.observation_size))
    action, _ = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(1))
    assert action.shape == (3, boxpush.action_size) and bool(jnp.all(jnp.abs(action) <= 1.0))


@pytest.mark.integration
def test_resume_matches_uninterrupted(boxpush, programs, tmp_path):
    kw = dict(BOXPUSH, num_timesteps=4 * ITER_STEPS, num_evals=0, seed=3, checkpoint_every=2, program_cache=programs)
    _, full, m_full = shac.train(boxpush, checkpoint_dir=tmp_path / "a", log_dir=tmp_path / "a", **kw)
    assert sorted(p.name for p in (tmp_path / "a").glob("shac_*.msgpack")) == [
        "shac_00000002.msgpack",
        "shac_00000004.msgpack",
    ]
    _, resumed, m_res = shac.train(
        boxpush, restore_from=tmp_path / "a" / "shac_00000002.msgpack", log_dir=tmp_path / "b", **kw
    )
    # Bit for bit: the same compiled iteration from the same restored state.
    for x, y in zip(_leaves(full), _leaves(resumed), strict=True):
        np.testing.assert_array_equal(x, y)
    assert m_res["num_steps"] == m_full["num_steps"]
    # Simulated control steps: >= 3 per env step (forward, recompute, VJP), continued
    # across the resume from the checkpoint's count.
    assert m_full["simulated_steps"] >= 3 * m_full["num_steps"]
    assert m_res["simulated_steps"] == pytest.approx(m_full["simulated_steps"])
    assert m_res["actor_loss"] == m_full["actor_loss"]
    rows = (tmp_path / "a" / "progress.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 and rows[0].startswith("iteration,num_steps")
    assert list((tmp_path / "a").glob("events.out.tfevents*")), "TensorBoard events missing"


_SHARDED_SCRIPT = textwrap.dedent(
    """
    import importlib.util, json, sys
    import jax, numpy as np
    import bcg_envs  # noqa: F401  (first: the one-thread CPU client)
    from bcg_envs.learners import shac
    assert len(jax.devices()) == int(sys.argv[5]), jax.devices()
    if sys.argv[1] != "-":  # a test double: its class, by file and name
        spec = importlib.util.spec_from_file_location("shac_test_env", sys.argv[1])
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        env = getattr(mod, sys.argv[2])()
    else:  # a registered env, by id
        env = shac.make_env(sys.argv[2])
    _, params, metrics = shac.train(env, **json.loads(sys.argv[3]))
    np.savez(sys.argv[4], *[np.asarray(x) for x in jax.tree.leaves(params)])
    """
)


def _train_in_subprocess(env, name, kw, out, devices=1, **environ):
    """``shac.train(env, **kw)`` in a fresh process on ``devices`` host devices (XLA flags
    must be set before JAX initializes), its parameters saved to ``out`` (.npz). A
    bcg_envs env is remade there by id (``name``), a test double by its class (``name``,
    built with no arguments); ``environ`` adds environment variables."""
    source = "-" if type(env).__module__.startswith("bcg_envs.") else inspect.getfile(type(env))
    flags = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={devices}").strip()
    sub_env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu", **environ)
    proc = subprocess.run(
        [sys.executable, "-c", _SHARDED_SCRIPT, source, name, json.dumps(kw), str(out), str(devices)],
        env=sub_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return np.load(out)


def _check_two_devices(env, name, kw, tmp_path, rtol):
    """Train on 1 device here and on 2 forced host devices in a subprocess; the
    parameters must agree within ``rtol`` of each array's scale."""
    _, one, _ = shac.train(env, devices=jax.devices()[:1], **kw)
    two = _train_in_subprocess(env, name, kw, tmp_path / "two.npz", devices=2)
    leaves = _leaves(one)
    assert len(two.files) == len(leaves)
    worst = 0.0
    for i, x in enumerate(leaves):
        y = two[f"arr_{i}"]
        assert y.shape == x.shape
        worst = max(worst, float(np.max(np.abs(y - x))) / (float(np.max(np.abs(x))) + 1e-6))
    print(f"{name}: 1 vs 2 devices, largest deviation / array scale = {worst:.2e}")
    assert worst < rtol


@pytest.mark.integration  # two fresh processes, each compiling SHAC: ~30 s
def test_same_seed_same_parameters_across_processes(point_mass, tmp_path):
    """Two fresh processes with one seed train to the same parameters bit for bit, the
    first compiling its programs into an empty persistent cache and the second loading
    them from it."""
    kw = dict(num_envs=8, horizon=8, num_timesteps=4 * 64, actor_hidden=(32, 32), critic_hidden=(32, 32))
    kw.update(num_evals=0, seed=2, progress_bar=False)
    cache = dict(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "cache"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    first = _train_in_subprocess(point_mass, "PointMass", kw, tmp_path / "first.npz", **cache)
    assert any((tmp_path / "cache").iterdir()), "the first process cached nothing"
    second = _train_in_subprocess(point_mass, "PointMass", kw, tmp_path / "second.npz", **cache)
    assert len(first.files) == len(second.files) > 0
    for key in first.files:
        np.testing.assert_array_equal(first[key], second[key])


def test_two_devices_match_one(point_mass, tmp_path):
    kw = dict(
        num_envs=8,
        horizon=8,
        num_timesteps=6 * 64,
        actor_hidden=(32, 32),
        critic_hidden=(32, 32),
        num_evals=0,
        seed=1,
        progress_bar=False,
    )
    _check_two_devices(point_mass, "PointMass", kw, tmp_path, rtol=1e-4)


@pytest.mark.long  # compiles BoxPush for 2 devices (~5 min cold); integration tier
def test_two_devices_match_one_boxpush(boxpush, tmp_path):
    kw = dict(BOXPUSH, num_timesteps=3 * ITER_STEPS, num_evals=0, seed=0)
    _check_two_devices(boxpush, "BoxPush-v0", kw, tmp_path, rtol=2e-3)


class EndlessPointMass(PointMass):
    """``PointMass`` without its early termination: every env's episode ends at step 40, so
    all envs stay in step with each other and the poisoned step's iterations are known."""

    def step(self, state, action):
        out = super().step(state, action)
        return out.replace(done=jnp.zeros_like(out.done))


def test_nan_gradients_are_skipped(caplog):
    """Step 3 of every 40-step episode has a NaN action cotangent; with 8 envs x 8 steps an
    iteration, it falls in iterations 0, 5 and 10 of 12, and exactly those are skipped."""
    env = NaNGradient(EndlessPointMass(), steps=(3,))
    with caplog.at_level("WARNING", logger="bcg_envs.learners.shac"):
        _, params, metrics = shac.train(
            env,
            num_envs=8,
            horizon=8,
            total_steps=12 * 64,  # the documented alias of num_timesteps
            actor_hidden=(32, 32),
            critic_hidden=(32, 32),
            num_evals=2,
            num_eval_envs=8,
            progress_bar=False,
        )
    assert metrics["skipped_updates"] == 3
    assert [int(i) for i in re.findall(r"SHAC iteration (\d+): actor gradient non-finite", caplog.text)] == [0, 5, 10]
    assert all(np.all(np.isfinite(x)) for x in _leaves(params))
    assert np.isfinite(metrics["eval/episode_reward"])
    assert "update skipped" in caplog.text


@pytest.mark.integration
def test_train_and_evaluate_run(programs, tmp_path):
    # The CLI entry points: a run folder that evaluate_run reads back.
    out = tmp_path / "run"
    metrics = runs.train_run(
        "BoxPush-v0",
        algo="shac",
        estimator="exact",
        steps=2 * ITER_STEPS,
        seed=0,
        out_dir=out,
        **{k: v for k, v in BOXPUSH.items() if k != "estimator"},
        num_evals=0,
        program_cache=programs,
    )
    for name in ("config.json", "params.msgpack", "progress.csv", "metrics.json"):
        assert (out / name).exists(), name
    assert "program_cache" not in json.loads((out / "config.json").read_text())["learner"]
    assert metrics["num_steps"] == 2 * ITER_STEPS
    result = runs.evaluate_run(out, episodes=4, episode_length=20)
    assert set(result) >= {"mean_return", "mean_length"} and result["mean_length"] == 20.0
    assert np.isfinite(result["mean_return"])
    # `bcg-envs evaluate --sim mujoco`: the same policy in both simulators.
    both = runs.sim_to_sim_run(out, episodes=4, episode_length=20)
    assert both["mjx"] == result
    assert both["mujoco"]["mean_length"] == 20.0 and np.isfinite(both["mujoco"]["mean_return"])
    # the run's checkpoint alone rebuilds the run's policy
    make_policy, params, network = shac.load_policy(out / "checkpoints")
    config, run_params, run_make_policy = runs.load_run(out)
    assert network.action_size == config["action_size"] and network.actor_hidden == tuple(BOXPUSH["actor_hidden"])
    obs = jax.random.normal(jax.random.PRNGKey(0), (3, config["observation_size"]))
    a, _ = make_policy(params)(obs, jax.random.PRNGKey(1))
    b, _ = run_make_policy(run_params)(obs, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
