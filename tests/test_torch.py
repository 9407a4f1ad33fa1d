"""PyTorch bridge: torch gradients through a JAX rollout equal jax.grad of the same rollout."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import bcg_envs  # noqa: E402
from bcg_envs.torch import TorchRollout  # noqa: E402

NUM_ENVS, HORIZON = 3, 6


def _jax_reference(env, states, actions):
    """Sum of rewards + 0.1 * sum of observations, and its jax.grad in the actions."""

    def loss(acts):
        def one(state, a):
            def body(s, x):
                s = env.step(s, x)
                return s, (s.reward, s.obs)

            return jax.lax.scan(body, state, a)[1]

        rewards, obs = jax.vmap(one)(states, acts)
        return jnp.sum(rewards) + 0.1 * jnp.sum(obs)

    return jax.jit(jax.value_and_grad(loss))(actions)


def _check(estimator):
    bridge = TorchRollout("BoxPush-v0", NUM_ENVS, HORIZON, estimator=estimator)
    obs0 = bridge.reset(seed=1)
    assert obs0.shape == (NUM_ENVS, bridge.observation_size)
    torch.manual_seed(0)
    actions = (torch.rand(NUM_ENVS, HORIZON, bridge.action_size) * 2 - 1).requires_grad_()
    rewards, obs = bridge(actions)
    assert rewards.shape == (NUM_ENVS, HORIZON) and obs.shape == (NUM_ENVS, HORIZON, bridge.observation_size)
    loss = rewards.sum() + 0.1 * obs.sum()
    loss.backward()

    env = bcg_envs.make_jax("BoxPush-v0", estimator=estimator)
    value, grad = _jax_reference(env, bridge.states, jnp.asarray(actions.detach().numpy()))
    np.testing.assert_allclose(loss.item(), float(value), rtol=1e-5)
    assert np.abs(np.asarray(grad)).max() > 0
    np.testing.assert_allclose(actions.grad.numpy(), np.asarray(grad), rtol=1e-4, atol=1e-5)
    return bridge, actions


@pytest.mark.long
def test_torch_gradients_equal_jax_grad_exact():
    bridge, actions = _check("exact")
    bridge.advance()  # the next window starts where this one ended
    assert bridge.obs.shape == (NUM_ENVS, bridge.observation_size) and bridge.done.dtype == torch.bool
    with pytest.raises(ValueError, match=r"actions must have shape \(3, 6, 2\)"):
        bridge(torch.zeros(3, 5, 2))
    with pytest.raises(ValueError, match="needs a rollout"):
        bridge.advance()
    with pytest.raises(ValueError, match="call reset"):
        TorchRollout(bridge.env, 2, 2)(torch.zeros(2, 2, 2))


@pytest.mark.long
def test_torch_gradients_equal_jax_grad_bcg():
    _check("bcg")


def test_import_bcg_envs_does_not_import_torch():
    code = "import sys, bcg_envs; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.fixture(scope="module")
def c_envs():
    """Two BoxPush envs on MuJoCo C (no XLA compile of the physics), shared by the module."""
    import gymnasium as gym

    envs = [gym.make("bcg_envs/BoxPush-v0", backend="mujoco") for _ in range(2)]
    yield envs
    for e in envs:
        e.close()


@pytest.mark.parametrize("estimator", list(bcg_envs.ESTIMATORS))
def test_torch_step_gradients_are_the_grad_step_jacobians(c_envs, estimator):
    """One step on the MuJoCo C backend: torch's gradient of ``w . obs' + 2 r`` equals
    ``B^T C^T w + 2 r_a`` of a second, identical env's ``grad_step`` (same seed, same
    estimator)."""
    from bcg_envs.torch import TorchStep

    bridge = TorchStep(c_envs[0], estimator=estimator)
    bridge.reset(seed=4)
    c_envs[1].reset(seed=4)
    for _ in range(3):  # walk into contact first (same actions in both envs)
        a = np.array([0.8, 0.1], np.float32)
        bridge.step(torch.as_tensor(a))
        c_envs[1].step(a)
    action = torch.tensor([0.5, -0.3], requires_grad=True)
    obs, reward = bridge.step(action)
    w = torch.linspace(-1.0, 1.0, obs.shape[0], dtype=obs.dtype)
    (w @ obs + 2.0 * reward).backward()
    ref = c_envs[1].unwrapped.grad_step(np.array([0.5, -0.3], np.float32), estimator=estimator)
    jac = ref.jacobians
    np.testing.assert_allclose(obs.detach().numpy(), ref.observation, rtol=1e-6)
    expected = jac.B.T @ jac.C.T @ w.numpy() + 2.0 * jac.r_a
    np.testing.assert_allclose(action.grad.numpy(), expected, rtol=1e-5, atol=1e-7)
    assert np.abs(expected).max() > 0


def test_torch_step_rejects_bad_input(c_envs):
    import gymnasium as gym

    from bcg_envs.torch import TorchStep

    with pytest.raises(ValueError, match="env must be one bcg_envs Gymnasium env"):
        TorchStep(object())
    vec = gym.make_vec("bcg_envs/BoxPush-v0", num_envs=2, vectorization_mode="vector_entry_point", backend="mujoco")
    with pytest.raises(ValueError, match="for a batch use TorchRollout"):
        TorchStep(vec)
    vec.close()
    bridge = TorchStep(c_envs[0])
    bridge.reset(seed=0)
    with pytest.raises(ValueError, match="action must have shape"):
        bridge.step(torch.zeros(3))
    with pytest.raises(ValueError, match="action must be finite"):
        bridge.step(torch.tensor([float("nan"), 0.0]))
    with pytest.raises(ValueError, match="action must be a floating-point tensor"):
        bridge.step(torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1, got 2.7"):
        TorchRollout("BoxPush-v0", 2.7, 4)
