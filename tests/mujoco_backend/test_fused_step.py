"""The single env's fused step (``EnvCore.plain_step``) against the general path
(``Stepper.step`` with ``fused`` off): the same outputs bit for bit, on a run with clipped
and float64 actions, contacts, a diverging state and ``grad_step`` in between; and the
Python-float action map (``_ActionMap.terms``) against its NumPy form."""

import gymnasium as gym
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
def test_action_map_terms_match_numpy(name):
    env = gym.make(f"bcg_envs/{name}", backend="mujoco")
    amap = env.unwrapped.simulation.task.action_map
    assert amap.terms is not None
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (2000, amap.M.shape[1])).astype(np.float32)
    actions[:4] = np.array([-1.0, 1.0, 0.0, -0.0], np.float32)[:, None]  # the edges and both zeros too
    for a in actions:
        values = a.tolist()
        fast = np.array([c + values[k] * w for c, k, w in amap.terms])
        assert fast.tobytes() == amap(a).tobytes()
    env.close()
