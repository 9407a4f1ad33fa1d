"""PyTorch bridge: differentiate bcg_envs steps and batched rollouts from torch.

``TorchStep(gym_env)`` wraps one Gymnasium env (either backend): ``step(action)`` is a
torch function of the action whose backward pass uses that step's ``grad_step`` Jacobians
(``d obs'/d a = C B``, ``d r/d a = r_a``), so any estimator, MJX or MuJoCo C, drives it.

``TorchRollout(env_id, num_envs, horizon, estimator="bcg")`` holds ``num_envs`` start
states on the JAX side; ``rollout(actions)`` takes a torch tensor of actions
``(num_envs, horizon, action_size)`` and returns torch tensors of rewards
``(num_envs, horizon)`` and observations ``(num_envs, horizon, observation_size)``
(those after each step). Its backward pass is ``jax.vjp`` of the whole rollout, so the
environment's gradients are the chosen estimator's. Arrays cross between the frameworks
with DLPack (no host copy on CPU). torch is optional: ``import bcg_envs`` never imports
this module.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import torch

from bcg_envs.gradients.registry import resolve

__all__ = ["TorchRollout", "TorchStep"]


def _to_jax(tensor: torch.Tensor) -> jax.Array:
    """A float32 JAX view of a torch tensor (DLPack; copies only to make it contiguous/float32)."""
    return jnp.from_dlpack(tensor.detach().to(torch.float32).contiguous())


def _to_torch(array: jax.Array) -> torch.Tensor:
    return torch.from_dlpack(array)


def _check_actions(name: str, actions: Any, shape: tuple) -> None:
    """``ValueError`` naming ``name`` unless it is a finite floating CPU tensor of ``shape``
    (a NaN action would be stepped as a diverged step, with a NaN gradient)."""
    if not isinstance(actions, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(actions).__name__}")
    if tuple(actions.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(actions.shape)}")
    if not actions.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {actions.dtype}")
    if actions.device.type != "cpu":
        raise ValueError(f"{name} must be a CPU tensor (the JAX env runs on CPU here), got {actions.device}")
    if not bool(torch.isfinite(actions).all()):
        raise ValueError(f"{name} must be finite (no NaN or inf)")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


class _RolloutFunction(torch.autograd.Function):
    """``actions -> (rewards, observations)``; backward applies the rollout's JAX VJP."""

    @staticmethod
    def forward(ctx: Any, actions: torch.Tensor, bridge: "TorchRollout") -> Tuple[torch.Tensor, torch.Tensor]:
        acts = _to_jax(actions)
        if actions.requires_grad:
            (rewards, obs), vjp_fn, final = bridge._forward_vjp(bridge.states, acts)
            ctx.vjp_fn = vjp_fn
            ctx.bridge = bridge
        else:
            rewards, obs, final = bridge._forward(bridge.states, acts)
        bridge._last_final = final
        ctx.dtype = actions.dtype
        return _to_torch(rewards), _to_torch(obs)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_rewards: torch.Tensor, grad_obs: torch.Tensor) -> Tuple[torch.Tensor, None]:
        if ctx.vjp_fn is None:
            raise RuntimeError("the rollout's backward pass ran already: its residuals are freed (no retain_graph)")
        cotangent = (_to_jax(grad_rewards), _to_jax(grad_obs))
        (grad_actions,) = ctx.bridge._apply_vjp(ctx.vjp_fn, cotangent)
        ctx.vjp_fn = None  # free the residuals
        return _to_torch(grad_actions).to(ctx.dtype), None


class TorchRollout:
    """Differentiable H-step rollouts of ``num_envs`` JAX envs for torch code.

    Args:
      env: an env id (``make_jax(env, estimator=estimator, **env_kwargs)``) or a JAX env.
      num_envs: batch size (vmapped envs).
      horizon: control steps per rollout (``actions.shape[1]`` must equal it).
      estimator, bundle: gradient estimator of the step's backward pass (``"exact"``,
        ``"bcg"``, ...) and its ``BundleConfig``; ``None`` keeps the env's own.

    Each distinct call pattern compiles once (forward-with-VJP, backward, and a plain
    forward used when ``actions`` does not require grad).
    """

    def __init__(
        self,
        env: Union[str, Any],
        num_envs: int,
        horizon: int,
        estimator: Optional[str] = None,
        bundle: Any = None,
        **env_kwargs: Any,
    ):
        num_envs, horizon = _positive_int("num_envs", num_envs), _positive_int("horizon", horizon)
        if isinstance(env, str):
            from bcg_envs.registry import make_jax

            if estimator is not None:
                env_kwargs["estimator"] = estimator
            if bundle is not None:
                env_kwargs["bundle"] = bundle
            env = make_jax(env, **env_kwargs)
            step = env.step
        else:
            if env_kwargs:
                raise ValueError(f"env_kwargs {sorted(env_kwargs)} need an env id, got an env object")
            if estimator is None and bundle is None:
                step = env.step
            else:
                stepper = env.stepper(estimator, bundle)
                step = lambda s, a: env.step_with(stepper, s, a)  # noqa: E731
        self.env = env
        self.num_envs = int(num_envs)
        self.horizon = int(horizon)
        self.action_size = int(env.action_size)
        self.observation_size = int(env.observation_size)
        self.states = None
        self._last_final = None

        def rollout(states, actions):
            def one(state, acts):
                def body(s, a):
                    s = step(s, a)
                    return s, (s.reward, s.obs)

                final, (rewards, obs) = jax.lax.scan(body, state, acts)
                return (rewards, obs), final

            return jax.vmap(one)(states, actions)

        def forward(states, actions):
            (rewards, obs), final = rollout(states, actions)
            return rewards, obs, final

        def forward_vjp(states, actions):
            return jax.vjp(lambda a: rollout(states, a), actions, has_aux=True)

        self._reset = jax.jit(jax.vmap(env.reset))
        self._forward = jax.jit(forward)
        self._forward_vjp = jax.jit(forward_vjp)
        self._apply_vjp = jax.jit(lambda vjp_fn, ct: vjp_fn(ct))

    # ----- start states -------------------------------------------------------------------
    def reset(self, seed: int = 0) -> torch.Tensor:
        """New start states (``num_envs`` reset keys split from ``seed``); returns their observations."""
        self.states = self._reset(jax.random.split(jax.random.PRNGKey(int(seed)), self.num_envs))
        self._last_final = None
        return self.obs

    def advance(self) -> None:
        """Make the last rollout's final states the next start states (truncated BPTT)."""
        if self._last_final is None:
            raise ValueError("advance() needs a rollout since the last reset()")
        self.states, self._last_final = self._last_final, None

    @property
    def obs(self) -> torch.Tensor:
        """Observations of the current start states, ``(num_envs, observation_size)``."""
        return _to_torch(self._need_states().obs)

    @property
    def done(self) -> torch.Tensor:
        """Whether each start state has ended (terminated or truncated), ``(num_envs,)`` bool."""
        s = self._need_states()
        return _to_torch((s.done > 0) | s.info["truncated"])

    def _need_states(self):
        if self.states is None:
            raise ValueError("call reset(seed) first: no start states yet")
        return self.states

    # ----- the differentiable rollout -----------------------------------------------------
    def __call__(self, actions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(rewards (num_envs, H), observations (num_envs, H, obs))`` of ``actions``
        ``(num_envs, H, action_size)`` (in [-1, 1]) applied from the start states.

        Differentiable in ``actions`` (backward = JAX VJP of the rollout). The start states
        do not move; ``advance()`` continues from the rollout's final states.
        """
        self._need_states()
        _check_actions("actions", actions, (self.num_envs, self.horizon, self.action_size))
        return _RolloutFunction.apply(actions, self)


class _StepFunction(torch.autograd.Function):
    """``action -> (observation, reward)`` of one ``grad_step``; backward uses its Jacobians."""

    @staticmethod
    def forward(ctx: Any, action: torch.Tensor, bridge: "TorchStep") -> Tuple[torch.Tensor, torch.Tensor]:
        out = bridge.env.unwrapped.grad_step(action.detach().to(torch.float32).numpy(), bridge.estimator, bridge.bundle)
        jac = out.jacobians
        ctx.obs_jacobian = torch.as_tensor(jac.C @ jac.B, dtype=action.dtype)  # d o'/d a, (nobs, nu)
        ctx.reward_jacobian = torch.as_tensor(jac.r_a, dtype=action.dtype)  # d r/d a, (nu,)
        bridge.last = out
        obs = torch.as_tensor(out.observation, dtype=action.dtype)
        return obs, torch.as_tensor(out.reward, dtype=action.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_obs: torch.Tensor, grad_reward: torch.Tensor) -> Tuple[torch.Tensor, None]:
        return ctx.obs_jacobian.T @ grad_obs + ctx.reward_jacobian * grad_reward, None


class TorchStep:
    """One Gymnasium bcg_envs env stepped from torch, differentiable in the action.

    ``step(action)`` advances the env like ``env.step`` and returns ``(observation,
    reward)`` tensors; ``last`` holds the full ``grad_step`` result (``terminated``,
    ``truncated``, ``info``, ``jacobians``). The backward pass maps cotangents of the
    observation and reward through ``C B`` and ``r_a`` of the chosen ``estimator``: a
    one-step gradient (chain steps yourself with ``jacobians.A`` for longer horizons, or use
    ``TorchRollout``, whose backward pass runs through the whole JAX rollout).
    """

    def __init__(self, env: Any, estimator: Optional[str] = None, bundle: Any = None):
        if not hasattr(getattr(env, "unwrapped", None), "grad_step") or hasattr(env, "num_envs"):
            raise ValueError(
                f"env must be one bcg_envs Gymnasium env (gym.make('bcg_envs/...'); for a batch use "
                f"TorchRollout), got {type(env).__name__}"
            )
        # The name is checked once, here; every step passes the ``Estimator``.
        self.estimator = None if estimator is None else resolve(estimator)
        self.env, self.bundle = env, bundle
        self.last = None

    def reset(self, seed: Optional[int] = None) -> torch.Tensor:
        """Reset the env; returns the first observation."""
        obs, _ = self.env.reset(seed=seed)
        self.last = None
        return torch.as_tensor(obs)

    def step(self, action: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(observation, reward)`` after ``action`` (shape ``(action_size,)``)."""
        _check_actions("action", action, tuple(self.env.action_space.shape))
        return _StepFunction.apply(action, self)
