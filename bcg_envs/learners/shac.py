"""SHAC: short-horizon actor-critic through the differentiable JAX step.

Xu et al. 2022, "Accelerated Policy Learning with Parallel Differentiable Simulation",
used as the learner of Bundled Contact Gradients. Every iteration:

1. roll ``num_envs`` environments ``horizon`` steps with the stochastic policy
   (reparameterized, ``tanh``-squashed Gaussian), auto-resetting ended episodes;
2. actor loss ``-(sum_t gamma^t r_t + gamma^h V'(s_h)) / (num_envs * horizon)``, where
   the discount restarts and the gradient is cut at every reset, ``V'`` is the target
   critic, the bootstrap is 0 on termination (``state.done``) and ``V'`` of the final
   observation on truncation (``state.info["truncated"]``); its gradient flows back
   through the environment step, whose backward pass is the chosen estimator (BCG ...);
3. one Adam step of the actor (clipped to ``actor_grad_clip``); a non-finite gradient,
   or one whose norm exceeds ``max_grad_norm``, skips the update (counted, logged);
4. TD(lambda) targets from the rollout, ``critic_iterations`` epochs of
   ``critic_minibatches`` minibatches of MSE regression, then a Polyak update of the
   target critic (``target <- alpha * target + (1 - alpha) * critic``);
5. the running observation normalizer (frozen during the rollout) absorbs the
   rollout's observations.

The whole iteration is one jitted function; environments are sharded over
``jax.devices()`` along a 1-D mesh (the batch axis of the env states), parameters are
replicated. The random stream of iteration ``i`` is ``fold_in(key, i)``, so a run
resumed from a checkpoint follows the same parameter trajectory as an uninterrupted one.

Defaults follow the paper: horizon 32, 64 envs, gamma 0.99,
TD(lambda) 0.95, Adam betas (0.7, 0.95), actor lr 5e-3, critic lr 2e-3, clip 1.0 / 10.0,
critic 16 x 4, actor [512, 256, 128] ELU + LayerNorm; target critic alpha 0.2 and initial
log std -1 as in SHAC's code. Choices and departures:

* the linear learning-rate decay (to ``min_lr`` = 1e-5) applies to actor and critic, as
  in SHAC's code (``lr_schedule="constant"`` turns it off);
* the critic MLP, unspecified in the paper summary, defaults to [128, 128];
* the actor's output layer starts small (variance scale 0.01): near-zero initial forces;
* a bad actor gradient skips the update instead of stopping training (SHAC raises);
* critic minibatches are reshuffled every epoch;
* small tasks want other settings: ``runs.TASK_DEFAULTS`` holds BoxPush's (gamma 0.95,
  actor lr 2e-3, 16 envs x 16 steps, [64, 64] nets).

Reading order: ``train`` (the driver) -> ``_Built._iterate`` (the jitted iteration) ->
``_rollout_loss`` / ``_td_lambda`` / ``_critic_update``.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from bcg_envs.learners import networks

logger = logging.getLogger(__name__)

Params = Dict[str, Any]
Policy = Callable[[jax.Array, jax.Array], Tuple[jax.Array, Dict[str, Any]]]

CHECKPOINT_PREFIX = "shac_"


# ----- stepping with a chosen estimator ------------------------------------------------------
def step_fn(env: Any, estimator: Optional[str] = None, bundle: Any = None) -> Callable:
    """``step(state, action)`` of ``env`` whose backward pass is ``estimator``.

    With neither ``estimator`` nor ``bundle`` this is ``env.step`` (the env's default
    estimator). The stepper is built here, outside any trace.
    """
    if estimator is None and bundle is None:
        return env.step
    stepper = env.stepper(estimator, bundle)
    return lambda state, action: env.step_with(stepper, state, action)


_ENVS: Dict[Any, Any] = {}


def make_env(env_id: str, bundle: Any = None) -> Any:
    """``bcg_envs.make_jax(env_id)``, cached per id so that repeated runs reuse compiled
    functions. ``train`` applies its ``estimator`` through ``step_fn``, which steps
    exactly as ``make_jax(env_id, estimator=estimator).step`` would. A ``bundle`` with
    ``horizon > 1`` makes the env with it: its state carries the branch rollouts."""
    from bcg_envs.registry import make_jax, short_name

    name = short_name(env_id)
    branching = bundle is not None and bundle.horizon > 1
    key = (name, bundle) if branching else name
    if key not in _ENVS:
        _ENVS[key] = make_jax(name, bundle=bundle) if branching else make_jax(name)
    return _ENVS[key]


# ----- policy factory ---------------------------------------------------------------------
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


# ----- training state -----------------------------------------------------------------------
@struct.dataclass
class TrainState:
    iteration: jax.Array  # int32: iterations completed
    key: jax.Array  # base key; iteration i uses fold_in(key, i)
    actor: Any
    critic: Any
    target_critic: Any
    actor_opt: Any
    critic_opt: Any
    normalizer: Dict[str, jax.Array]
    env_state: Any  # batched bcg_envs State, leading axis num_envs (sharded)
    ep_return: jax.Array  # (num_envs,) return of the running episodes
    ep_length: jax.Array  # (num_envs,) int32
    skipped: jax.Array  # int32: skipped actor updates so far


@dataclasses.dataclass(frozen=True)
class _Static:
    """Shapes and architecture baked into the compiled iteration (a cache key). The
    scalar hyper-parameters (``HYPER_KEYS``) are arguments of the compiled function, so
    one compilation serves every setting of them (sweeps, tests)."""

    num_envs: int
    horizon: int
    adam_betas: Tuple[float, float]
    critic_iterations: int
    critic_minibatches: int
    actor_hidden: Tuple[int, ...]
    critic_hidden: Tuple[int, ...]
    activation: str
    layer_norm: bool
    init_log_std: float
    normalize_observations: bool


#: Scalar hyper-parameters passed to the compiled iteration as float32 arrays.
HYPER_KEYS = (
    "gamma",
    "td_lambda",
    "actor_lr",
    "critic_lr",
    "min_lr",
    "lr_decay",  # 1.0: linear decay to min_lr over the run, 0.0: constant
    "actor_grad_clip",
    "critic_grad_clip",
    "target_critic_alpha",
    "reward_scaling",
    "max_grad_norm",
    "total_iterations",
)


def _lr(hp, base: str, iteration) -> jax.Array:
    """SHAC's per-iteration linear decay from ``hp[base]`` to ``min_lr`` (or constant)."""
    frac = jnp.clip(iteration.astype(jnp.float32) / jnp.maximum(hp["total_iterations"], 1.0), 0.0, 1.0)
    return hp[base] + (hp["min_lr"] - hp[base]) * frac * hp["lr_decay"]


def _where_tree(pred, new, old):
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), new, old)


def _batch_where(mask, a, b):
    return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim)), a, b)


# ----- the compiled pieces ------------------------------------------------------------------
class _Built:
    """Jitted init / iteration / evaluation of one (env, estimator, hyper-parameters)."""

    def __init__(self, env: Any, step: Callable, cfg: _Static, devices: Sequence[Any]):
        self.env, self.step, self.cfg = env, step, cfg
        self.mesh = Mesh(np.asarray(devices), ("batch",))
        self.replicated = NamedSharding(self.mesh, P())
        self.batched = NamedSharding(self.mesh, P("batch"))
        self.obs_size = int(env.observation_size)
        self.action_size = int(env.action_size)
        self.actor = networks.Actor(
            self.action_size, cfg.actor_hidden, cfg.activation, cfg.layer_norm, cfg.init_log_std
        )
        self.critic = networks.Critic(cfg.critic_hidden, cfg.activation, cfg.layer_norm)
        b1, b2 = cfg.adam_betas
        # Gradient clipping has no optimizer state, so the clip norm can be a traced value.
        self.make_tx = lambda clip: optax.chain(optax.clip_by_global_norm(clip), optax.scale_by_adam(b1=b1, b2=b2))
        self.reset_batch = jax.vmap(env.reset)
        self.step_batch = jax.vmap(step)

        template = jax.eval_shape(self._init, jax.random.PRNGKey(0))
        self.state_shardings = self._shardings(template)
        self.init = jax.jit(self._init, out_shardings=self.state_shardings)
        self.iterate = jax.jit(
            self._iterate,
            in_shardings=(self.state_shardings, self.replicated),
            out_shardings=(self.state_shardings, self.replicated),
        )
        self._evaluators: Dict[Tuple[int, int], Callable] = {}

    def _shardings(self, state: TrainState) -> TrainState:
        rep = jax.tree.map(lambda _: self.replicated, state)
        bat = functools.partial(jax.tree.map, lambda _: self.batched)
        return rep.replace(env_state=bat(state.env_state), ep_return=self.batched, ep_length=self.batched)

    # -- init ----------------------------------------------------------------------------
    def _init(self, key: jax.Array) -> TrainState:
        cfg = self.cfg
        k_actor, k_critic, k_env, k_loop = jax.random.split(key, 4)
        dummy = jnp.zeros((1, self.obs_size))
        actor = self.actor.init(k_actor, dummy)
        critic = self.critic.init(k_critic, dummy)
        env_state = self.reset_batch(jax.random.split(k_env, cfg.num_envs))
        return TrainState(
            iteration=jnp.zeros((), jnp.int32),
            key=k_loop,
            actor=actor,
            critic=critic,
            target_critic=critic,
            actor_opt=self.make_tx(1.0).init(actor),
            critic_opt=self.make_tx(1.0).init(critic),
            normalizer=networks.normalizer_init(self.obs_size),
            env_state=env_state,
            ep_return=jnp.zeros((cfg.num_envs,), jnp.float32),
            ep_length=jnp.zeros((cfg.num_envs,), jnp.int32),
            skipped=jnp.zeros((), jnp.int32),
        )

    def _norm(self, normalizer, obs):
        return networks.normalize(normalizer, obs) if self.cfg.normalize_observations else obs

    # -- rollout and actor loss ------------------------------------------------------------
    def _autoreset(self, ended, state):
        """Replace ended envs by fresh episodes (keys from their own rng), cutting the
        gradient: ``where`` sends a zero cotangent to the ended branch."""

        def reset(s):
            keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(s.info["rng"])
            fresh = self.reset_batch(jax.lax.stop_gradient(keys))
            return jax.tree.map(lambda a, b: _batch_where(ended, a, b), fresh, s)

        return jax.lax.cond(jnp.any(ended), reset, lambda s: s, state)

    def _rollout_loss(self, actor_params, target_critic, normalizer, env_state, ep_return, ep_length, key, hp):
        cfg = self.cfg
        n, h, gamma = cfg.num_envs, cfg.horizon, hp["gamma"]

        def body(carry, t):
            state, disc, ep_ret, ep_len = carry
            obs = self._norm(normalizer, state.obs)
            action = networks.sample_action(self.actor, actor_params, obs, jax.random.fold_in(key, t))
            nxt = self.step_batch(state, action)
            reward = nxt.reward * hp["reward_scaling"]
            done = nxt.done > 0
            ended = done | nxt.info["truncated"]
            v_next = self.critic.apply(target_critic, self._norm(normalizer, nxt.obs))
            v_next = jnp.where(done, 0.0, v_next)
            bootstrap = ended | (t == h - 1)
            objective = disc * reward + jnp.where(bootstrap, disc * gamma * v_next, 0.0)
            ep_ret = ep_ret + jax.lax.stop_gradient(nxt.reward)
            ep_len = ep_len + 1
            out = {
                "objective": objective,
                "obs": jax.lax.stop_gradient(obs),
                "raw_obs": jax.lax.stop_gradient(state.obs),
                "reward": jax.lax.stop_gradient(reward),
                "v_next": jax.lax.stop_gradient(v_next),
                "ended": ended,
                "done": done,
                "finished_return": jnp.where(ended, ep_ret, 0.0),
                "finished_length": jnp.where(ended, ep_len, 0),
                "bundled": nxt.info.get("bundled", jnp.zeros_like(done)),
                "env_metrics": jax.lax.stop_gradient(nxt.metrics),
            }
            nxt = self._autoreset(ended, nxt)
            disc = jnp.where(ended, 1.0, disc * gamma)
            ep_ret = jnp.where(ended, 0.0, ep_ret)
            ep_len = jnp.where(ended, 0, ep_len)
            return (nxt, disc, ep_ret, ep_len), out

        init = (env_state, jnp.ones((n,), jnp.float32), ep_return, ep_length)
        (state, _, ep_return, ep_length), traj = jax.lax.scan(body, init, jnp.arange(h))
        loss = -jnp.sum(traj.pop("objective")) / (n * h)
        aux = (jax.lax.stop_gradient(state), ep_return, ep_length, traj)
        return loss, aux

    # -- critic --------------------------------------------------------------------------
    def _td_lambda(self, reward, v_next, ended, hp):
        """TD(lambda) targets over the horizon; episode ends bootstrap with ``v_next``
        alone (0 on termination), the horizon end with ``V'(s_h)``."""
        gamma, lam = hp["gamma"], hp["td_lambda"]

        def body(g_next, x):
            r, v, e = x
            g = r + gamma * jnp.where(e, v, (1.0 - lam) * v + lam * g_next)
            return g, g

        _, targets = jax.lax.scan(body, v_next[-1], (reward, v_next, ended), reverse=True)
        return targets

    def _critic_update(self, critic, opt, obs, targets, key, lr, hp):
        cfg = self.cfg
        tx = self.make_tx(hp["critic_grad_clip"])
        obs = obs.reshape(-1, obs.shape[-1])
        targets = targets.reshape(-1)
        size = obs.shape[0]
        mb = size // cfg.critic_minibatches

        def loss_fn(params, idx):
            return jnp.mean(jnp.square(self.critic.apply(params, obs[idx]) - targets[idx]))

        def minibatch(carry, idx):
            params, opt = carry
            loss, grads = jax.value_and_grad(loss_fn)(params, idx)
            ok = jnp.isfinite(loss) & jnp.isfinite(optax.tree.norm(grads))
            grads = jax.tree.map(lambda g: jnp.where(ok, g, 0.0), grads)
            updates, new_opt = tx.update(grads, opt, params)
            new_params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
            return (_where_tree(ok, new_params, params), _where_tree(ok, new_opt, opt)), (loss, ~ok)

        def epoch(carry, k):
            perm = jax.random.permutation(k, size)[: mb * cfg.critic_minibatches]
            return jax.lax.scan(minibatch, carry, perm.reshape(cfg.critic_minibatches, mb))

        keys = jax.random.split(key, cfg.critic_iterations)
        (critic, opt), (losses, bad) = jax.lax.scan(epoch, (critic, opt), keys)
        return critic, opt, losses, jnp.sum(bad)

    # -- one iteration -------------------------------------------------------------------
    def _iterate(self, ts: TrainState, hp: Dict[str, jax.Array]) -> Tuple[TrainState, Dict[str, jax.Array]]:
        cfg = self.cfg
        key = jax.random.fold_in(ts.key, ts.iteration)
        k_roll, k_critic = jax.random.split(key)
        normalizer = ts.normalizer  # frozen during the rollout

        grad_fn = jax.value_and_grad(self._rollout_loss, has_aux=True)
        (loss, (env_state, ep_return, ep_length, traj)), grads = grad_fn(
            ts.actor, ts.target_critic, normalizer, ts.env_state, ts.ep_return, ts.ep_length, k_roll, hp
        )
        grad_norm = optax.tree.norm(grads)
        ok = jnp.isfinite(loss) & jnp.isfinite(grad_norm) & (grad_norm <= hp["max_grad_norm"])
        grads = jax.tree.map(lambda g: jnp.where(ok, g, 0.0), grads)
        actor_lr = _lr(hp, "actor_lr", ts.iteration)
        updates, actor_opt = self.make_tx(hp["actor_grad_clip"]).update(grads, ts.actor_opt, ts.actor)
        actor = jax.tree.map(lambda p, u: p - actor_lr * u, ts.actor, updates)
        actor = _where_tree(ok, actor, ts.actor)
        actor_opt = _where_tree(ok, actor_opt, ts.actor_opt)

        targets = self._td_lambda(traj["reward"], traj["v_next"], traj["ended"], hp)
        critic_lr = _lr(hp, "critic_lr", ts.iteration)
        critic, critic_opt, critic_losses, critic_bad = self._critic_update(
            ts.critic, ts.critic_opt, traj["obs"], targets, k_critic, critic_lr, hp
        )
        alpha = hp["target_critic_alpha"]
        target_critic = jax.tree.map(lambda t, c: alpha * t + (1.0 - alpha) * c, ts.target_critic, critic)

        if cfg.normalize_observations:
            finite = jnp.all(jnp.isfinite(traj["raw_obs"]))
            normalizer = _where_tree(finite, networks.normalizer_update(normalizer, traj["raw_obs"]), normalizer)

        finished = jnp.sum(traj["ended"])
        new = TrainState(
            iteration=ts.iteration + 1,
            key=ts.key,
            actor=actor,
            critic=critic,
            target_critic=target_critic,
            actor_opt=actor_opt,
            critic_opt=critic_opt,
            normalizer=normalizer,
            env_state=env_state,
            ep_return=ep_return,
            ep_length=ep_length,
            skipped=ts.skipped + (~ok).astype(jnp.int32),
        )
        metrics = {
            "actor_loss": loss,
            "actor_grad_norm": grad_norm,
            "update_skipped": (~ok).astype(jnp.float32),
            "critic_loss": jnp.mean(critic_losses[-1]),
            "critic_skipped_minibatches": critic_bad.astype(jnp.float32),
            "value_target": jnp.mean(targets),
            "reward": jnp.mean(traj["reward"]) / hp["reward_scaling"],
            "episodes": finished.astype(jnp.float32),
            "episode_reward": jnp.sum(traj["finished_return"]) / jnp.maximum(finished, 1),
            "episode_length": jnp.sum(traj["finished_length"]) / jnp.maximum(finished, 1),
            "terminations": jnp.sum(traj["done"]).astype(jnp.float32),
            "bundled_fraction": jnp.mean(traj["bundled"].astype(jnp.float32)),
            "actor_lr": actor_lr,
            "critic_lr": critic_lr,
            "action_std": jnp.mean(jnp.exp(ts.actor["params"]["log_std"])),
        }
        metrics.update({f"env/{k}": jnp.mean(v) for k, v in traj["env_metrics"].items()})
        return new, metrics

    # -- evaluation ----------------------------------------------------------------------
    def evaluator(self, num_envs: int, length: int) -> Callable:
        """Jitted ``(actor, normalizer, key) -> metrics`` of the deterministic policy over
        one episode (at most ``length`` steps, no reset) of ``num_envs`` envs."""
        if (num_envs, length) not in self._evaluators:
            n_dev = self.mesh.devices.size
            shard = self.batched if num_envs % n_dev == 0 else self.replicated

            def evaluate(actor, normalizer, key):
                state = self.reset_batch(jax.random.split(key, num_envs))
                state = jax.lax.with_sharding_constraint(state, jax.tree.map(lambda _: shard, state))

                def body(carry, _):
                    state, alive, ret, steps, success = carry
                    obs = self._norm(normalizer, state.obs)
                    action = networks.deterministic_action(self.actor, actor, obs)
                    nxt = self.step_batch(state, action)
                    ret = ret + jnp.where(alive, nxt.reward, 0.0)
                    steps = steps + alive.astype(jnp.int32)
                    # success as SB3 reads it: info["is_success"] at the episode's last step
                    is_success = nxt.info.get("is_success", jnp.zeros_like(alive))  # absent in foreign envs
                    success = jnp.where(alive, is_success, success)
                    alive = alive & (nxt.done <= 0) & ~nxt.info["truncated"]
                    return (nxt, alive, ret, steps, success), None

                n = num_envs
                init = (state, jnp.ones((n,), bool), jnp.zeros((n,)), jnp.zeros((n,), jnp.int32), jnp.zeros((n,), bool))
                (_, _, ret, steps, success), _ = jax.lax.scan(body, init, None, length=length)
                return {
                    "eval/episode_reward": jnp.mean(ret),
                    "eval/episode_reward_std": jnp.std(ret),
                    "eval/episode_length": jnp.mean(steps.astype(jnp.float32)),
                    "eval/success": jnp.mean(success.astype(jnp.float32)),
                }

            self._evaluators[(num_envs, length)] = jax.jit(evaluate)
        return self._evaluators[(num_envs, length)]


#: Compiled trainers, keyed by env identity, estimator and hyper-parameters, so that
#: repeated ``train`` calls (tests, seeds sweeps) reuse traced and compiled functions.
_CACHE: Dict[Any, Tuple[Any, _Built]] = {}
_CACHE_SIZE = 4


def _built(env, estimator, bundle, cfg: _Static, devices) -> _Built:
    key = (id(env), estimator, bundle, cfg, tuple(d.id for d in devices), tuple(d.platform for d in devices))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is env:
        return hit[1]
    built = _Built(env, step_fn(env, estimator, bundle), cfg, devices)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (env, built)
    return built


# ----- checkpoints --------------------------------------------------------------------------
def save_checkpoint(path: Union[str, Path], ts: TrainState, meta: Optional[Dict[str, Any]] = None) -> Path:
    """Write the whole training state (flax msgpack of its leaves) atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    leaves = [np.asarray(x) for x in jax.tree.leaves(jax.device_get(ts))]
    payload = {
        "iteration": int(ts.iteration),
        "meta": json.dumps(meta or {}),
        "leaves": {str(i): leaf for i, leaf in enumerate(leaves)},
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(flax.serialization.msgpack_serialize(payload))
    os.replace(tmp, path)
    return path


def latest_checkpoint(path: Union[str, Path]) -> Path:
    """``path`` itself if it is a file, else the newest ``shac_*.msgpack`` in it."""
    path = Path(path)
    if path.is_file():
        return path
    found = sorted(path.glob(f"{CHECKPOINT_PREFIX}*.msgpack"))
    if not found:
        raise FileNotFoundError(f"no SHAC checkpoint ({CHECKPOINT_PREFIX}*.msgpack) in {path}")
    return found[-1]


def load_checkpoint(path: Union[str, Path], template: TrainState) -> TrainState:
    """Restore a ``TrainState`` saved by ``save_checkpoint`` into ``template``'s structure."""
    payload = flax.serialization.msgpack_restore(latest_checkpoint(path).read_bytes())
    leaves = payload["leaves"]
    ref, treedef = jax.tree.flatten(template)
    if len(leaves) != len(ref):
        raise ValueError(f"checkpoint has {len(leaves)} arrays, this trainer expects {len(ref)}: different config?")
    out = []
    for i, r in enumerate(ref):
        x = np.asarray(leaves[str(i)])
        if x.shape != tuple(r.shape) or x.dtype != r.dtype:
            raise ValueError(
                f"checkpoint array {i} is {x.dtype}{x.shape}, expected {r.dtype}{tuple(r.shape)}: different config?"
            )
        out.append(x)
    return jax.tree.unflatten(treedef, out)


# ----- logging ------------------------------------------------------------------------------
class _Loggers:
    """CSV (``log_dir/progress.csv``) and TensorBoard (tensorboardX) sinks."""

    def __init__(self, log_dir: Optional[Union[str, Path]], fields: Sequence[str], append: bool):
        self.csv_file = self.writer = self.tb = None
        if log_dir is None:
            return
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        path = log_dir / "progress.csv"
        fields = list(fields)
        if append and path.exists() and path.stat().st_size:
            with path.open() as f:
                fields = next(csv.reader(f), fields)
            self.csv_file = path.open("a", newline="")
            self.writer = csv.DictWriter(self.csv_file, fields, extrasaction="ignore")
        else:
            self.csv_file = path.open("w", newline="")
            self.writer = csv.DictWriter(self.csv_file, fields, extrasaction="ignore")
            self.writer.writeheader()
        try:
            from tensorboardX import SummaryWriter

            self.tb = SummaryWriter(str(log_dir))
        except ImportError:  # pragma: no cover - tensorboardX is optional
            logger.warning("tensorboardX is not installed; TensorBoard logging disabled")

    def write(self, step: int, row: Dict[str, float]) -> None:
        if self.writer is not None:
            self.writer.writerow(row)
            self.csv_file.flush()
        if self.tb is not None:
            for k, v in row.items():
                if k != "num_steps" and isinstance(v, (int, float)) and math.isfinite(v):
                    self.tb.add_scalar(k, v, step)

    def close(self) -> None:
        if self.csv_file is not None:
            self.csv_file.close()
        if self.tb is not None:
            self.tb.close()


# ----- the trainer --------------------------------------------------------------------------
def train(
    environment: Any,
    *,
    num_envs: int = 64,
    horizon: int = 32,
    num_timesteps: Optional[int] = None,
    total_steps: Optional[int] = None,
    estimator: Optional[str] = None,
    bundle: Any = None,
    gamma: float = 0.99,
    td_lambda: float = 0.95,
    actor_lr: float = 5e-3,
    critic_lr: float = 2e-3,
    lr_schedule: str = "linear",
    min_lr: float = 1e-5,
    adam_betas: Tuple[float, float] = (0.7, 0.95),
    actor_grad_clip: float = 1.0,
    critic_grad_clip: float = 10.0,
    critic_iterations: int = 16,
    critic_minibatches: int = 4,
    actor_hidden: Sequence[int] = (512, 256, 128),
    critic_hidden: Sequence[int] = (128, 128),
    activation: str = "elu",
    layer_norm: bool = True,
    init_log_std: float = -1.0,
    target_critic_alpha: float = 0.2,
    normalize_observations: bool = True,
    reward_scaling: float = 1.0,
    max_grad_norm: float = 1e6,
    seed: int = 0,
    devices: Optional[Sequence[Any]] = None,
    progress_fn: Optional[Callable[[int, Dict[str, float]], None]] = None,
    checkpoint_dir: Optional[Union[str, Path]] = None,
    checkpoint_every: int = 50,
    restore_from: Optional[Union[str, Path]] = None,
    num_evals: int = 5,
    num_eval_envs: int = 16,
    run_evals: bool = True,
    policy_params_fn: Optional[Callable[[int, Callable, Any], None]] = None,
    eval_episode_length: Optional[int] = None,
    log_dir: Optional[Union[str, Path]] = None,
    progress_bar: bool = True,
):
    """Train a SHAC policy by back-propagating through the environment step.

    Args:
      environment: a bcg_envs JAX env (``reset``/``step``/``observation_size``/
        ``action_size``/``episode_length``) or an env id (``bcg_envs.make_jax(id,
        estimator=estimator)``).
      num_envs, horizon: parallel envs and the short horizon h (paper: 64, 32).
      num_timesteps: env-step budget; iterations = ceil(num_timesteps / (num_envs * h)).
        ``total_steps`` is an alias (kept for callers that use that name); give exactly one.
      estimator, bundle: gradient estimator of the step's backward pass (``"bcg"``,
        ``"exact"``, ...) and its ``BundleConfig``; ``None`` keeps the env's own.
      gamma, td_lambda: discount and TD(lambda) of the critic targets (0.99, 0.95).
      actor_lr, critic_lr, lr_schedule, min_lr: Adam step sizes; ``"linear"`` decays both
        per iteration to ``min_lr`` as SHAC's code does, ``"constant"`` keeps them.
      adam_betas: (0.7, 0.95) as SHAC.
      actor_grad_clip, critic_grad_clip: global-norm clips (1.0, 10.0).
      critic_iterations, critic_minibatches: critic epochs x minibatches (16 x 4).
      actor_hidden, critic_hidden, activation, layer_norm: MLPs (Dense, activation,
        LayerNorm), paper actor [512, 256, 128] ELU + LayerNorm.
      init_log_std: initial state-independent log std of the Gaussian (SHAC: -1).
      target_critic_alpha: Polyak factor, target <- alpha * target + (1 - alpha) * critic.
      normalize_observations: running mean/std of observations (frozen per rollout).
      reward_scaling: multiplies rewards in the losses (logged returns are unscaled).
      max_grad_norm: an actor gradient that is non-finite or has a larger global norm
        skips the update (``metrics["skipped_updates"]``).
      seed: seeds networks, envs and the per-iteration random stream.
      devices: devices to shard envs over (default ``jax.devices()``); ``num_envs`` must
        be a multiple of their number.
      progress_fn: ``progress_fn(num_steps, metrics)`` after every evaluation.
      checkpoint_dir, checkpoint_every: save the full training state every N iterations
        (and at the end) as ``checkpoint_dir/shac_XXXXXXXX.msgpack``.
      restore_from: a checkpoint file or directory (its newest) to resume from; with the
        same arguments the resumed run reproduces the uninterrupted one.
      num_evals: evaluations of the deterministic policy, evenly spaced from iteration 0
        to the end (0 disables them).
      num_eval_envs, eval_episode_length: evaluation batch and episode cap (default the
        env's ``episode_length``).
      run_evals: run SHAC's own evaluation (MJX, ``num_eval_envs`` episodes) at the
        evaluation points; ``False`` keeps the points for ``policy_params_fn`` only (as
        Brax's ``run_evals``).
      policy_params_fn: ``policy_params_fn(num_steps, make_policy, params)`` at every
        evaluation point (Brax's hook): score the policy with your own protocol.
      log_dir: write ``progress.csv`` and TensorBoard events there.
      progress_bar: show a tqdm bar (steps, return, steps/s).

    Returns:
      ``(make_policy, params, metrics)``: ``make_policy(params, deterministic=True)`` gives
      ``policy(obs, key) -> (action, extras)``; ``params`` has ``"normalizer"``,
      ``"actor"``, ``"critic"``; ``metrics`` holds the last training and evaluation
      metrics, ``num_steps``, ``skipped_updates`` and ``training/walltime``.
    """
    env = make_env(environment, bundle) if isinstance(environment, str) else environment
    if (num_timesteps is None) == (total_steps is None):
        raise ValueError("give exactly one of num_timesteps and total_steps (the env-step budget)")
    num_timesteps = int(num_timesteps if num_timesteps is not None else total_steps)
    if num_envs < 1 or horizon < 1 or num_timesteps < 1:
        raise ValueError("num_envs, horizon and num_timesteps must be >= 1")
    if lr_schedule not in ("linear", "constant"):
        raise ValueError(f"lr_schedule must be 'linear' or 'constant', got {lr_schedule!r}")
    if (num_envs * horizon) < critic_minibatches:
        raise ValueError("num_envs * horizon must be >= critic_minibatches")
    devices = list(devices) if devices is not None else jax.devices()
    if num_envs % len(devices):
        raise ValueError(f"num_envs ({num_envs}) must be a multiple of the number of devices ({len(devices)})")
    cfg = _Static(
        num_envs=int(num_envs),
        horizon=int(horizon),
        adam_betas=(float(adam_betas[0]), float(adam_betas[1])),
        critic_iterations=int(critic_iterations),
        critic_minibatches=int(critic_minibatches),
        actor_hidden=tuple(int(w) for w in actor_hidden),
        critic_hidden=tuple(int(w) for w in critic_hidden),
        activation=activation,
        layer_norm=bool(layer_norm),
        init_log_std=float(init_log_std),
        normalize_observations=bool(normalize_observations),
    )
    networks.activation_fn(activation)
    built = _built(env, estimator, bundle, cfg, devices)
    steps_per_iter = num_envs * horizon
    num_iterations = max(1, math.ceil(num_timesteps / steps_per_iter))
    hyper = {
        "gamma": gamma,
        "td_lambda": td_lambda,
        "actor_lr": actor_lr,
        "critic_lr": critic_lr,
        "min_lr": min_lr,
        "lr_decay": 1.0 if lr_schedule == "linear" else 0.0,
        "actor_grad_clip": actor_grad_clip,
        "critic_grad_clip": critic_grad_clip,
        "target_critic_alpha": target_critic_alpha,
        "reward_scaling": reward_scaling,
        "max_grad_norm": max_grad_norm,
        "total_iterations": num_iterations,
    }
    assert tuple(hyper) == HYPER_KEYS
    hp = jax.device_put({k: jnp.asarray(float(v), jnp.float32) for k, v in hyper.items()}, built.replicated)
    eval_length = int(eval_episode_length or env.episode_length)
    eval_iters = (
        sorted({int(round(x)) for x in np.linspace(0, num_iterations, max(num_evals, 2))})
        if num_evals > 0
        else []
    )
    if num_evals == 1:
        eval_iters = [num_iterations]
    eval_key = jax.random.fold_in(jax.random.PRNGKey(seed), 0x5EED)

    ts = built.init(jax.random.PRNGKey(seed))
    if restore_from is not None:
        ts = jax.device_put(load_checkpoint(restore_from, ts), built.state_shardings)
    start = int(ts.iteration)

    make_policy = make_inference_fn(
        built.action_size,
        actor_hidden=cfg.actor_hidden,
        activation=cfg.activation,
        layer_norm=cfg.layer_norm,
        normalize_observations=cfg.normalize_observations,
    )
    meta = {
        "algo": "shac",
        "config": dataclasses.asdict(cfg),
        "hyper": hyper,
        "seed": seed,
        "num_timesteps": num_timesteps,
    }
    eval_fields = ["eval/episode_reward", "eval/episode_reward_std", "eval/episode_length", "eval/success"]
    train_fields = list(jax.eval_shape(built.iterate, ts, hp)[1]) if log_dir is not None else []
    fields = ["iteration", "num_steps", "walltime", *train_fields, "skipped_updates", *eval_fields]
    loggers = _Loggers(log_dir, fields, append=start > 0)
    bar = None
    if progress_bar:
        from tqdm.auto import tqdm

        bar = tqdm(total=num_iterations * steps_per_iter, initial=start * steps_per_iter, unit="step", desc="SHAC")

    metrics: Dict[str, float] = {}
    t0 = time.time()
    last_return = float("nan")
    skipped_seen = int(ts.skipped)

    def run_eval(num_steps: int) -> Dict[str, float]:
        if policy_params_fn is not None:
            policy_params_fn(num_steps, make_policy, jax.device_get({"normalizer": ts.normalizer, "actor": ts.actor}))
        if not run_evals:
            return {}
        # The same evaluation episodes (eval_key) every time, so evaluations compare.
        evaluate = built.evaluator(num_eval_envs, eval_length)
        return {k: float(v) for k, v in evaluate(ts.actor, ts.normalizer, eval_key).items()}

    try:
        if start == 0 and 0 in eval_iters:
            metrics.update(run_eval(0))
            metrics.update(num_steps=0, skipped_updates=0)
            loggers.write(0, {"iteration": 0, "num_steps": 0, "walltime": 0.0, **metrics})
            if progress_fn is not None:
                progress_fn(0, dict(metrics))
        for it in range(start, num_iterations):
            t_iter = time.time()
            ts, train_metrics = built.iterate(ts, hp)
            train_metrics = {k: float(v) for k, v in jax.device_get(train_metrics).items()}
            done_iters = it + 1
            num_steps = done_iters * steps_per_iter
            skipped = int(ts.skipped)
            if skipped > skipped_seen:
                logger.warning(
                    "SHAC iteration %d: actor gradient non-finite or too large (norm %s > %g); update skipped "
                    "(%d skipped so far)",
                    it,
                    train_metrics["actor_grad_norm"],
                    max_grad_norm,
                    skipped,
                )
                skipped_seen = skipped
            metrics = {k: v for k, v in metrics.items() if k.startswith("eval/")}
            metrics.update(train_metrics)
            metrics.update(num_steps=num_steps, skipped_updates=skipped)
            row = {"iteration": done_iters, "num_steps": num_steps, "walltime": time.time() - t0, **train_metrics}
            row["skipped_updates"] = skipped
            if train_metrics["episodes"] > 0:
                last_return = train_metrics["episode_reward"]
            if math.isfinite(last_return):
                postfix = {"return": f"{last_return:.2f}"}
            else:  # no episode finished yet
                postfix = {"reward/step": f"{train_metrics['reward']:.3f}"}
            if done_iters in eval_iters:
                eval_metrics = run_eval(num_steps)
                metrics.update(eval_metrics)
                row.update(eval_metrics)
            loggers.write(num_steps, row)
            if checkpoint_dir is not None and (done_iters % checkpoint_every == 0 or done_iters == num_iterations):
                save_checkpoint(Path(checkpoint_dir) / f"{CHECKPOINT_PREFIX}{done_iters:08d}.msgpack", ts, meta)
            if bar is not None:
                bar.update(steps_per_iter)
                postfix["steps/s"] = f"{steps_per_iter / max(time.time() - t_iter, 1e-9):.0f}"
                bar.set_postfix(postfix, refresh=False)
            if done_iters in eval_iters and progress_fn is not None:
                progress_fn(num_steps, dict(metrics))
    finally:
        if bar is not None:
            bar.close()
        loggers.close()

    metrics["training/walltime"] = time.time() - t0
    metrics["num_steps"] = num_iterations * steps_per_iter
    metrics["skipped_updates"] = int(ts.skipped)
    params = jax.device_get({"normalizer": ts.normalizer, "actor": ts.actor, "critic": ts.critic})
    return make_policy, params, metrics
