"""Networks and the observation normalizer of the first-order learners.

* ``MLP``: Dense -> activation -> LayerNorm blocks (SHAC's actor/critic layout, Xu et al.
  2022), then a linear output layer.
* ``Actor``: Gaussian policy with a state-independent learned log std; samples are
  squashed to [-1, 1] with ``tanh`` (as in SHAC).
* ``Critic``: state-value MLP.
* Normalizer: running mean/variance merged batch-wise (Chan et al.'s parallel form of
  Welford's algorithm), a plain dict of arrays so that it checkpoints like any pytree.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Sequence, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

ACTIVATIONS: Dict[str, Callable[[jax.Array], jax.Array]] = {
    "elu": nn.elu,
    "relu": nn.relu,
    "tanh": jnp.tanh,
    "silu": nn.silu,
}


def activation_fn(name: str) -> Callable[[jax.Array], jax.Array]:
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]


class MLP(nn.Module):
    """``hidden`` Dense layers, each followed by ``activation`` and (optionally) LayerNorm."""

    hidden: Sequence[int]
    out: int
    activation: str = "elu"
    layer_norm: bool = True
    out_scale: float = 1.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = activation_fn(self.activation)
        for width in self.hidden:
            x = nn.Dense(width)(x)
            x = act(x)
            if self.layer_norm:
                x = nn.LayerNorm()(x)
        init = nn.initializers.variance_scaling(self.out_scale, "fan_in", "truncated_normal")
        return nn.Dense(self.out, kernel_init=init)(x)


class Actor(nn.Module):
    """Mean of a Gaussian (pre-squash) and its state-independent log std."""

    action_size: int
    hidden: Sequence[int]
    activation: str = "elu"
    layer_norm: bool = True
    init_log_std: float = -1.0
    #: Variance scale of the output layer's initializer: the initial mean's standard
    #: deviation is about ``sqrt(output_scale)`` over LayerNorm features (0.01 -> ~0.1,
    #: near zero force; 1e-4 -> ~0.01, a residual policy that starts at its reference).
    output_scale: float = 0.01

    @nn.compact
    def __call__(self, obs: jax.Array) -> Tuple[jax.Array, jax.Array]:
        mean = MLP(self.hidden, self.action_size, self.activation, self.layer_norm, out_scale=self.output_scale)(obs)
        log_std = self.param("log_std", nn.initializers.constant(self.init_log_std), (self.action_size,))
        return mean, jnp.broadcast_to(log_std, mean.shape)


class Critic(nn.Module):
    hidden: Sequence[int]
    activation: str = "elu"
    layer_norm: bool = True

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        return MLP(self.hidden, 1, self.activation, self.layer_norm)(obs)[..., 0]


def sample_action(actor: Actor, params: Any, obs: jax.Array, key: jax.Array) -> jax.Array:
    """Reparameterized sample ``tanh(mean + std * eps)`` (differentiable in ``params``)."""
    mean, log_std = actor.apply(params, obs)
    eps = jax.random.normal(key, mean.shape, mean.dtype)
    return jnp.tanh(mean + jnp.exp(log_std) * eps)


def deterministic_action(actor: Actor, params: Any, obs: jax.Array) -> jax.Array:
    mean, _ = actor.apply(params, obs)
    return jnp.tanh(mean)


# ----- running observation normalizer ------------------------------------------------------
def normalizer_init(size: int) -> Dict[str, jax.Array]:
    """Mean 0, variance 1, a tiny prior count (as SHAC's ``RunningMeanStd``)."""
    return {
        "mean": jnp.zeros((size,), jnp.float32),
        "var": jnp.ones((size,), jnp.float32),
        "count": jnp.asarray(1e-4, jnp.float32),
    }


def normalizer_update(state: Dict[str, jax.Array], batch: jax.Array) -> Dict[str, jax.Array]:
    """Merge a batch ``(..., size)`` into the running statistics (parallel Welford)."""
    x = batch.reshape(-1, batch.shape[-1]).astype(jnp.float32)
    n = jnp.asarray(x.shape[0], jnp.float32)
    b_mean = jnp.mean(x, axis=0)
    b_var = jnp.mean(jnp.square(x - b_mean), axis=0)
    count = state["count"] + n
    delta = b_mean - state["mean"]
    mean = state["mean"] + delta * n / count
    m2 = state["var"] * state["count"] + b_var * n + jnp.square(delta) * state["count"] * n / count
    return {"mean": mean, "var": m2 / count, "count": count}


def normalize(state: Dict[str, jax.Array], obs: jax.Array, eps: float = 1e-5) -> jax.Array:
    return (obs - state["mean"]) / jnp.sqrt(state["var"] + eps)
