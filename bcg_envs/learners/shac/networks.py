"""SHAC's networks: the actor/critic pair, its configuration and the policy factory.

The building blocks (MLP, Gaussian actor, critic, observation normalizer) are
``bcg_envs.learners.networks``; this module fixes how SHAC assembles them.
``NetworkConfig`` is everything needed to rebuild the policy, so checkpoints store it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Mapping, Sequence, Tuple

import jax

from bcg_envs.learners import networks

Params = Dict[str, Any]
Policy = Callable[[jax.Array, jax.Array], Tuple[jax.Array, Dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Sizes and architecture of SHAC's actor and critic (hashable; JSON via ``to_dict``)."""

    observation_size: int
    action_size: int
    actor_hidden: Tuple[int, ...] = (512, 256, 128)
    critic_hidden: Tuple[int, ...] = (128, 128)
    activation: str = "elu"
    layer_norm: bool = True
    init_log_std: float = -1.0
    normalize_observations: bool = True
    actor_output_scale: float = 0.01

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict (tuples as lists)."""
        out = dataclasses.asdict(self)
        out["actor_hidden"] = list(self.actor_hidden)
        out["critic_hidden"] = list(self.critic_hidden)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "NetworkConfig":
        """Inverse of ``to_dict`` (unknown keys are an error)."""
        d = dict(d)
        for k in ("actor_hidden", "critic_hidden"):
            if k in d:
                d[k] = tuple(int(w) for w in d[k])
        return cls(**d)


@dataclasses.dataclass(frozen=True)
class ShacNetworks:
    """The actor and critic modules and whether observations are normalized."""

    actor: networks.Actor
    critic: networks.Critic
    normalize_observations: bool

    def normalize(self, normalizer: Dict[str, jax.Array], obs: jax.Array) -> jax.Array:
        """``obs`` normalized by the running statistics ``normalizer`` (or as is)."""
        return networks.normalize(normalizer, obs) if self.normalize_observations else obs


def make_shac_networks(config: NetworkConfig) -> ShacNetworks:
    """The actor (``tanh``-squashed Gaussian) and critic MLPs of ``config``."""
    networks.activation_fn(config.activation)  # a bad name fails here, before tracing
    actor = networks.Actor(
        config.action_size,
        tuple(config.actor_hidden),
        config.activation,
        config.layer_norm,
        config.init_log_std,
        config.actor_output_scale,
    )
    critic = networks.Critic(tuple(config.critic_hidden), config.activation, config.layer_norm)
    return ShacNetworks(actor, critic, bool(config.normalize_observations))


def make_inference_fn(
    action_size: int,
    *,
    actor_hidden: Sequence[int] = (512, 256, 128),
    activation: str = "elu",
    layer_norm: bool = True,
    normalize_observations: bool = True,
) -> Callable[..., Policy]:
    """``make_policy(params, deterministic=True) -> policy(obs, key) -> (action, extras)``.

    ``params`` is the dict ``train`` returns (``"normalizer"``, ``"actor"``, ...). Actions
    lie in [-1, 1]; ``obs`` may carry leading batch axes.
    """
    actor = networks.Actor(action_size, tuple(actor_hidden), activation, layer_norm)

    def make_policy(params: Params, deterministic: bool = True) -> Policy:
        def policy(obs: jax.Array, key: jax.Array):
            x = networks.normalize(params["normalizer"], obs) if normalize_observations else obs
            if deterministic:
                return networks.deterministic_action(actor, params["actor"], x), {}
            return networks.sample_action(actor, params["actor"], x, key), {}

        return policy

    return make_policy


def inference_fn_from_config(config: NetworkConfig) -> Callable[..., Policy]:
    """``make_inference_fn`` for the policy network ``config`` describes."""
    return make_inference_fn(
        config.action_size,
        actor_hidden=config.actor_hidden,
        activation=config.activation,
        layer_norm=config.layer_norm,
        normalize_observations=config.normalize_observations,
    )
