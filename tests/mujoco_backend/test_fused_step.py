"""The single env's fused step (``EnvCore.plain_step``) against the general path
(``Stepper.step`` with ``fused`` off): the same outputs bit for bit, on a run with clipped
and float64 actions, contacts, a diverging state and ``grad_step`` in between."""

import gymnasium as gym
import jax
import numpy as np
import pytest

import bcg_envs  # noqa: F401  (registers the ids)
from tests.mujoco_backend.conftest import TASKS


def canonical(value):
    """``value`` as nested tuples of types and exact bytes (dict order included)."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return tuple((k, canonical(v)) for k, v in value.items())
    if isinstance(value, (tuple, list)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, repr(value))


def run(name: str, fused: bool, steps: int = 60):
    env = gym.make(f"bcg_envs/{name}", backend="mujoco")
    stepper = env.unwrapped.simulation.stepper
    if not fused:
        stepper.fused = False
    rng = np.random.default_rng(3)
    out = [canonical(env.reset(seed=5))]
    nu = env.action_space.shape[0]
    for t in range(steps):
        action = rng.uniform(-1.4, 1.4, nu)
        action = action.astype(np.float32) if t % 2 else action  # float64 every other step
        if t == 25:  # diverges: the step is reverted and the episode ends
            qpos, qvel, act = env.unwrapped.get_state()
            env.unwrapped.set_state(qpos, qvel + 1e7, act)
        result = env.unwrapped.grad_step(action)[:5] if t % 10 == 9 else env.step(action)
        out.append(canonical(result))
        if result[2] or result[3]:
            out.append(canonical(env.reset()))
    fused_used = stepper.fused
    env.close()
    return out, fused_used


@pytest.mark.parametrize("name", TASKS[:2])
def test_fused_step_is_bit_identical_to_the_general_path(name):
    fused, used = run(name, True)
    assert used, f"{name} should take the fused step"
    general, _ = run(name, False)
    assert len(fused) == len(general)
    for i, (a, b) in enumerate(zip(fused, general)):
        assert a == b, f"{name}: output {i} differs"


@pytest.mark.parametrize("name", TASKS[:2])
def test_fused_step_meets_its_first_contact_like_the_general_path(name):
    """A step that meets the env's first contact is redone substep by substep (for its
    contact log): the same outputs and state as the general path, warnings included."""
    runs = []
    for fused in (True, False):
        env = gym.make(f"bcg_envs/{name}", backend="mujoco")
        env.unwrapped.simulation.stepper.fused = fused
        env.reset(seed=11)
        d = env.unwrapped.data
        rng = np.random.default_rng(7)
        out, redone = [], 0
        for _ in range(80):
            before = d.maxuse_con
            result = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
            redone += before == 0 and d.maxuse_con > 0
            out.append(canonical(result))
            out.append(canonical((d.qpos.copy(), d.qvel.copy(), d.qacc_warmstart.copy(), d.warning.number.copy())))
            if result[2] or result[3]:
                out.append(canonical(env.reset()))
        runs.append((out, redone))
        env.close()
    (fused, redone), (general, _) = runs
    assert fused == general
    if name == "PlanarHand-v0":
        assert redone == 1, "the run should meet a first contact"


@pytest.mark.parametrize("name", TASKS[:2])
def test_list_packer_matches_pack_lists(name):
    env = gym.make(f"bcg_envs/{name}", backend="mujoco")
    env.reset(seed=1)
    core = env.unwrapped.simulation.core
    p = core.s.program
    lists = {i: v.reshape(-1).tolist() for i, v in core.leaves.items()}
    action = np.linspace(-1, 1, p.nu, dtype=np.float32).tolist()
    info = dict(core.info, sim_diverged=True)
    assert p.list_packer()(lists, action, lists, info) == p.pack_lists(lists, action, lists, info)
    env.close()


def test_shared_inputs_feed_the_program():
    """Writes into ``shared_inputs``' host arrays are what the next call reads: the same
    output as NumPy inputs of those values."""
    env = gym.make("bcg_envs/BoxPush-v0", backend="mujoco")
    env.reset(seed=2)
    core = env.unwrapped.simulation.core
    p = core.s.program
    shared = p.shared_inputs()
    if jax.devices()[0].platform != "cpu":
        pytest.skip("host memory is shared with the CPU backend only")
    assert shared is not None, "zero-copy inputs are not shared on the CPU backend"
    fhost, ihost, fargs, iargs = shared
    fn = p.function(False)
    fvec, ivec = p.pack(core.leaves, np.zeros(p.nu, np.float32), core.leaves, core.info)
    rng = np.random.default_rng(0)
    for k in range(3):
        f = (fvec + rng.normal(0, 0.1, fvec.shape)).astype(np.float32)
        i = (ivec + k % 2).astype(np.int32)
        fhost[:], ihost[:] = f, i
        assert np.asarray(fn(fargs, iargs)).tobytes() == np.asarray(fn(f, i)).tobytes()
    env.close()


def test_fused_step_returns_fresh_info():
    """Each step returns a new info dict with its own arrays: changing one changes no other
    step's and not the env's."""
    env = gym.make("bcg_envs/BoxPush-v0", backend="mujoco")
    env.reset(seed=3)
    assert env.unwrapped.simulation.stepper.fused
    a = np.zeros(env.action_space.shape, np.float32)
    *_, info1 = env.step(a)
    goal = info1["goal"].copy()
    info1["goal"][...] = 99.0
    info1["step"] = -5
    *_, info2 = env.step(a)
    assert info2 is not info1
    assert np.array_equal(info2["goal"], goal) and info2["step"] == 2
    assert np.array_equal(env.unwrapped.task_info()["goal"], goal)
    env.close()
