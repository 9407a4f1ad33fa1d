"""SHAC training: the driver ``train`` and the jitted programs it runs.

``TrainingPrograms`` compiles, for one env, estimator and ``StaticConfig``, the state
initializer and the iteration (rollout and actor step, critic regression, target and
normalizer updates; losses in ``losses``) and holds the evaluators (``evaluator``).
``train`` checks its arguments, builds the programs (or takes them from a
``ProgramCache`` the caller owns), and runs the loop: evaluations, logging,
checkpoints. The algorithm and its defaults are described in the package docstring.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
import zlib
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from bcg_envs.gradients.cost import simulations_per_step
from bcg_envs.gradients.registry import Estimator, resolve
from bcg_envs.learners import networks
from bcg_envs.learners.progress_log import ProgressLog
from bcg_envs.learners.shac import checkpoint, evaluator, losses
from bcg_envs.learners.shac.networks import NetworkConfig, inference_fn_from_config, make_shac_networks

logger = logging.getLogger(__name__)


# ----- stepping with a chosen estimator ------------------------------------------------------
def simulation_cost(
    env: Any, estimator: Optional[Union[str, Estimator]] = None, bundle: Any = None
) -> Callable[[float], float]:
    """``bundled_fraction -> simulated control steps per env step`` of SHAC's rollout
    gradient with ``env``'s step and this estimator (``bcg_envs.gradients.cost``). An env
    without ``stepper`` (not a bcg_envs task) counts as ``exact``: forward, recompute, VJP."""
    if not hasattr(env, "stepper"):
        return lambda bundled_fraction: simulations_per_step("exact", 0, 0, 0, 0.0)
    stepper = env.stepper(estimator, bundle)
    return functools.partial(
        simulations_per_step,
        stepper.estimator,
        stepper.nx,
        stepper.nu,
        stepper.num_samples,
        horizon=stepper.config.horizon,
    )


def step_fn(env: Any, estimator: Optional[Union[str, Estimator]] = None, bundle: Any = None) -> Callable:
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


# ----- training state and configuration -------------------------------------------------------
@struct.dataclass
class TrainState:
    """Everything a SHAC run carries between iterations (a pytree; checkpointed whole)."""

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
class StaticConfig:
    """Shapes and architecture baked into the compiled iteration (a ``ProgramCache``
    key). The scalar hyper-parameters (``HYPER_KEYS``) are arguments of the compiled
    function, so one compilation serves every setting of them (sweeps, tests)."""

    num_envs: int
    horizon: int
    adam_betas: Tuple[float, float]
    critic_iterations: int
    critic_minibatches: int
    network: NetworkConfig


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


def _lr(hp: Dict[str, jax.Array], base: str, iteration: jax.Array) -> jax.Array:
    """SHAC's per-iteration linear decay from ``hp[base]`` to ``min_lr`` (or constant)."""
    frac = jnp.clip(iteration.astype(jnp.float32) / jnp.maximum(hp["total_iterations"], 1.0), 0.0, 1.0)
    return hp[base] + (hp["min_lr"] - hp[base]) * frac * hp["lr_decay"]


# ----- the compiled programs ------------------------------------------------------------------
class TrainingPrograms:
    """Jitted init / iteration / evaluation of one (env, step, ``StaticConfig``, devices).

    Environments are sharded over ``devices`` along a 1-D mesh (axis ``"batch"``, the
    batch axis of the env states); parameters are replicated. ``devices`` may span
    several processes (``jax.distributed``): the programs then work on global arrays,
    each process stepping the envs of its own devices, and XLA averages the gradients
    across processes. Build once and call ``init``/``iterate`` as often as wanted:
    compiled code is reused.
    """

    def __init__(self, env: Any, step: Callable, cfg: StaticConfig, devices: Sequence[Any]):
        self.env, self.step, self.cfg = env, step, cfg
        self.mesh = Mesh(np.asarray(devices), ("batch",))
        self.replicated = NamedSharding(self.mesh, P())
        self.batched = NamedSharding(self.mesh, P("batch"))
        self.obs_size = cfg.network.observation_size
        self.action_size = cfg.network.action_size
        self.nets = make_shac_networks(cfg.network)
        b1, b2 = cfg.adam_betas
        # Gradient clipping has no optimizer state, so the clip norm can be a traced value.
        self.make_tx: Callable[[Any], optax.GradientTransformation] = lambda clip: optax.chain(
            optax.clip_by_global_norm(clip), optax.scale_by_adam(b1=b1, b2=b2)
        )
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

    def _init(self, key: jax.Array) -> TrainState:
        cfg = self.cfg
        k_actor, k_critic, k_env, k_loop = jax.random.split(key, 4)
        dummy = jnp.zeros((1, self.obs_size))
        actor = self.nets.actor.init(k_actor, dummy)
        critic = self.nets.critic.init(k_critic, dummy)
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

    def _iterate(self, ts: TrainState, hp: Dict[str, jax.Array]) -> Tuple[TrainState, Dict[str, jax.Array]]:
        """One SHAC iteration: rollout + actor step, critic regression, target critic and
        normalizer updates. Returns the new state and the iteration's metrics."""
        cfg = self.cfg
        key = jax.random.fold_in(ts.key, ts.iteration)
        k_roll, k_critic = jax.random.split(key)
        normalizer = ts.normalizer  # frozen during the rollout

        loss_fn = functools.partial(
            losses.rollout_loss,
            nets=self.nets,
            reset_batch=self.reset_batch,
            step_batch=self.step_batch,
            horizon=cfg.horizon,
            gamma=hp["gamma"],
            reward_scaling=hp["reward_scaling"],
        )
        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        (loss, (env_state, ep_return, ep_length, traj)), grads = grad_fn(
            ts.actor, ts.target_critic, normalizer, ts.env_state, ts.ep_return, ts.ep_length, k_roll
        )
        # A non-finite or too large actor gradient skips the update (counted, logged).
        grad_norm = optax.tree.norm(grads)
        ok = jnp.isfinite(loss) & jnp.isfinite(grad_norm) & (grad_norm <= hp["max_grad_norm"])
        grads = jax.tree.map(lambda g: jnp.where(ok, g, 0.0), grads)
        actor_lr = _lr(hp, "actor_lr", ts.iteration)
        updates, actor_opt = self.make_tx(hp["actor_grad_clip"]).update(grads, ts.actor_opt, ts.actor)
        actor = jax.tree.map(lambda p, u: p - actor_lr * u, ts.actor, updates)
        actor = losses.select_tree(ok, actor, ts.actor)
        actor_opt = losses.select_tree(ok, actor_opt, ts.actor_opt)

        targets = losses.td_lambda_targets(traj["reward"], traj["v_next"], traj["ended"], hp["gamma"], hp["td_lambda"])
        critic_lr = _lr(hp, "critic_lr", ts.iteration)
        critic, critic_opt, critic_losses, critic_bad = losses.critic_update(
            ts.critic,
            ts.critic_opt,
            traj["obs"],
            targets,
            k_critic,
            critic_lr,
            critic=self.nets.critic,
            tx=self.make_tx(hp["critic_grad_clip"]),
            iterations=cfg.critic_iterations,
            minibatches=cfg.critic_minibatches,
        )
        target_critic = losses.polyak_update(ts.target_critic, critic, hp["target_critic_alpha"])

        if cfg.network.normalize_observations:
            finite = jnp.all(jnp.isfinite(traj["raw_obs"]))
            normalizer = losses.select_tree(finite, networks.normalizer_update(normalizer, traj["raw_obs"]), normalizer)

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

    def evaluator(self, num_envs: int, length: int) -> Callable:
        """Jitted ``(actor, normalizer, key) -> metrics`` of the deterministic policy
        (``evaluator.make_evaluator``), built once per ``(num_envs, length)``."""
        if (num_envs, length) not in self._evaluators:
            self._evaluators[(num_envs, length)] = evaluator.make_evaluator(
                self.nets, self.reset_batch, self.step_batch, num_envs, length, self.mesh
            )
        return self._evaluators[(num_envs, length)]


class ProgramCache:
    """Compiled ``TrainingPrograms`` kept between ``train`` calls by whoever owns the cache.

    ``train(..., program_cache=cache)`` reuses the programs of an earlier call with the
    same env object, estimator, bundle, ``StaticConfig`` and devices, skipping the
    re-trace and re-lowering (tens of seconds on BoxPush, more on G1). Only the
    ``maxsize`` most recently added entries are kept; entries hold their env alive.
    Without a cache, every ``train`` call builds its own programs.
    """

    def __init__(self, maxsize: int = 4):
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = int(maxsize)
        self._entries: "OrderedDict[Any, Tuple[Any, TrainingPrograms]]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every entry."""
        self._entries.clear()

    def get(
        self, env: Any, estimator: Optional[str], bundle: Any, cfg: StaticConfig, devices: Sequence[Any]
    ) -> TrainingPrograms:
        """The programs for these arguments, built (and stored) on a miss."""
        key = (id(env), estimator, bundle, cfg, tuple(d.id for d in devices), tuple(d.platform for d in devices))
        hit = self._entries.get(key)
        if hit is not None and hit[0] is env:
            return hit[1]
        programs = TrainingPrograms(env, step_fn(env, estimator, bundle), cfg, devices)
        if len(self._entries) >= self.maxsize:
            self._entries.popitem(last=False)
        self._entries[key] = (env, programs)
        return programs


def check_env_split(num_envs: int, devices: Sequence[Any], process_count: int) -> None:
    """Raise ``ValueError`` unless ``num_envs`` envs split evenly over ``devices`` and
    over the ``process_count`` processes of the run.

    With several processes (``jax.distributed``) ``devices`` must hold the same number
    of devices of every process: each process then steps ``num_envs / process_count``
    envs, and none waits on a collective it is not part of.
    """
    if process_count > 1:
        if num_envs % process_count:
            raise ValueError(
                f"num_envs ({num_envs}) must be a multiple of the number of processes ({process_count}): "
                "every process steps the same share of the envs"
            )
        per_process = Counter(int(d.process_index) for d in devices)
        if set(per_process) != set(range(process_count)):
            raise ValueError(
                f"devices must include devices of every process (0 .. {process_count - 1}), got devices of "
                f"processes {sorted(per_process)}: give jax.devices() (the default) or a subset that spans them all"
            )
        if len(set(per_process.values())) > 1:
            raise ValueError(
                "devices must hold the same number of devices of every process, got "
                f"{dict(sorted(per_process.items()))} (process: devices)"
            )
    if num_envs % len(devices):
        raise ValueError(f"num_envs ({num_envs}) must be a multiple of the number of devices ({len(devices)})")


# ----- the trainer ----------------------------------------------------------------------------
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
    actor_output_scale: float = 0.01,
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
    program_cache: Optional[ProgramCache] = None,
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
      actor_output_scale: variance scale of the actor's output-layer initializer; the
        initial mean action has a standard deviation of about its square root (0.01:
        ~0.1; 1e-4 starts a residual policy, as G1's, at its reference tracker).
      target_critic_alpha: Polyak factor, target <- alpha * target + (1 - alpha) * critic.
      normalize_observations: running mean/std of observations (frozen per rollout).
      reward_scaling: multiplies rewards in the losses (logged returns are unscaled).
      max_grad_norm: an actor gradient that is non-finite or has a larger global norm
        skips the update (``metrics["skipped_updates"]``).
      seed: seeds networks, envs and the per-iteration random stream.
      devices: devices to shard envs over (default ``jax.devices()``: after
        ``jax.distributed.initialize`` those of every process); ``num_envs`` must be a
        multiple of their number and of the number of processes (``check_env_split``).
        With several processes every process calls ``train`` with the same arguments;
        it returns the same parameters and metrics on each.
      progress_fn: ``progress_fn(num_steps, metrics)`` after every evaluation (on
        process 0 only, as are ``policy_params_fn``, the progress bar, the log and
        checkpoint files).
      checkpoint_dir, checkpoint_every: save the full training state every N iterations
        (and at the end) as ``checkpoint_dir/shac_XXXXXXXX.msgpack``
        (``checkpoint.load_policy`` rebuilds the policy from one); 0 saves it at every
        evaluation point instead (and at the end), so that checkpoints and evaluations
        coincide. An iteration's checkpoint is written after its ``progress_fn`` call:
        a run stopped while its caller records an evaluation resumes before that
        evaluation and repeats it, rather than from a checkpoint past it.
      restore_from: a checkpoint file or directory (its newest) to resume from; with the
        same arguments the resumed run reproduces the uninterrupted one. With several
        processes every process reads it (a path all of them can read).
      num_evals: evaluations of the deterministic policy, evenly spaced from iteration 0
        to the end (0 disables them).
      num_eval_envs, eval_episode_length: evaluation batch and episode cap (default the
        env's ``episode_length``).
      run_evals: run SHAC's own evaluation (MJX, ``num_eval_envs`` episodes) at the
        evaluation points; ``False`` keeps the points for ``policy_params_fn`` only (as
        Brax's ``run_evals``).
      policy_params_fn: ``policy_params_fn(num_steps, make_policy, params)`` at every
        evaluation point (Brax's hook): score the policy with your own protocol.
      log_dir: write ``progress.csv`` and TensorBoard events there (a ``ProgressLog``
        called every iteration).
      progress_bar: show a tqdm bar (steps, return, steps/s).
      program_cache: a ``ProgramCache`` to take compiled programs from and add them to
        (repeated runs on the same env object and architecture); ``None`` compiles afresh.

    Returns:
      ``(make_policy, params, metrics)``: ``make_policy(params, deterministic=True)`` gives
      ``policy(obs, key) -> (action, extras)``; ``params`` has ``"normalizer"``,
      ``"actor"``, ``"critic"``; ``metrics`` holds the last training and evaluation
      metrics, ``num_steps``, ``skipped_updates``, ``training/walltime`` and
      ``simulated_steps``: control steps simulated so far, forward and backward, by the
      cost model of ``bcg_envs.gradients.cost`` (bundle branches counted), and
      ``bundled_steps``: training env steps whose gradient ``bcg`` bundled so far (0 for
      other estimators); both also in every ``progress_fn`` call and ``progress.csv`` row.
    """
    if estimator is not None:
        estimator = resolve(estimator)  # the name is checked here, before any env is built
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
    if checkpoint_every < 0:
        raise ValueError(f"checkpoint_every must be >= 0 (0: at the evaluation points), got {checkpoint_every}")
    devices = list(devices) if devices is not None else jax.devices()
    check_env_split(num_envs, devices, jax.process_count())
    lead = jax.process_index() == 0  # writes files, shows progress, calls the hooks
    networks.activation_fn(activation)
    cfg = StaticConfig(
        num_envs=int(num_envs),
        horizon=int(horizon),
        adam_betas=(float(adam_betas[0]), float(adam_betas[1])),
        critic_iterations=int(critic_iterations),
        critic_minibatches=int(critic_minibatches),
        network=NetworkConfig(
            observation_size=int(env.observation_size),
            action_size=int(env.action_size),
            actor_hidden=tuple(int(w) for w in actor_hidden),
            critic_hidden=tuple(int(w) for w in critic_hidden),
            activation=activation,
            layer_norm=bool(layer_norm),
            init_log_std=float(init_log_std),
            actor_output_scale=float(actor_output_scale),
            normalize_observations=bool(normalize_observations),
        ),
    )
    if program_cache is not None:
        built = program_cache.get(env, estimator, bundle, cfg, devices)
    else:
        built = TrainingPrograms(env, step_fn(env, estimator, bundle), cfg, devices)
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
        sorted({int(round(x)) for x in np.linspace(0, num_iterations, max(num_evals, 2))}) if num_evals > 0 else []
    )
    if num_evals == 1:
        eval_iters = [num_iterations]
    eval_key = jax.random.fold_in(jax.random.PRNGKey(seed), 0x5EED)
    if jax.process_count() > 1:
        # Every process feeds the same key and settings to one global program; a process
        # with another seed would hold other "replicated" parameters, silently.
        digest = np.uint32(zlib.crc32(repr((seed, cfg, num_iterations)).encode()))
        multihost_utils.assert_equal(digest, "seed, num_envs, horizon, networks and budget differ between processes")

    ts = built.init(jax.random.PRNGKey(seed))
    if restore_from is not None:
        ts = jax.device_put(checkpoint.load_checkpoint(restore_from, ts), built.state_shardings)
    start = int(ts.iteration)
    sims_per_step = simulation_cost(env, estimator, bundle)
    simulated = float(start * steps_per_iter * sims_per_step(0.0))
    bundled = 0.0
    if restore_from is not None:
        saved = checkpoint.checkpoint_metadata(restore_from)
        simulated = float(saved.get("simulated_steps", simulated))
        bundled = float(saved.get("bundled_steps", math.nan))  # nan: a checkpoint from before the count

    make_policy = inference_fn_from_config(cfg.network)
    meta = {
        "algo": "shac",
        "config": dataclasses.asdict(cfg),
        "hyper": hyper,
        "seed": seed,
        "num_timesteps": num_timesteps,
    }
    log = None
    if log_dir is not None and lead:
        train_fields = list(jax.eval_shape(built.iterate, ts, hp)[1])
        fields = [
            "iteration",
            "num_steps",
            "walltime",
            *train_fields,
            "simulated_steps",
            "bundled_steps",
            "skipped_updates",
            *evaluator.EVAL_FIELDS,
        ]
        log = ProgressLog(log_dir, fields, append=start > 0)
    bar = None
    if progress_bar and lead:
        from tqdm.auto import tqdm

        bar = tqdm(total=num_iterations * steps_per_iter, initial=start * steps_per_iter, unit="step", desc="SHAC")

    metrics: Dict[str, float] = {}
    t0 = time.time()
    last_return = float("nan")
    skipped_seen = int(ts.skipped)

    def run_eval(num_steps: int) -> Dict[str, float]:
        if policy_params_fn is not None and lead:
            policy_params_fn(num_steps, make_policy, jax.device_get({"normalizer": ts.normalizer, "actor": ts.actor}))
        if not run_evals:
            return {}
        # The same evaluation episodes (eval_key) every time, so evaluations compare.
        evaluate = built.evaluator(num_eval_envs, eval_length)
        return {k: float(v) for k, v in evaluate(ts.actor, ts.normalizer, eval_key).items()}

    try:
        if start == 0 and 0 in eval_iters:
            metrics.update(run_eval(0))
            metrics.update(num_steps=0, skipped_updates=0, simulated_steps=0.0, bundled_steps=0.0)
            if log is not None:
                log(0, {"iteration": 0, "num_steps": 0, "walltime": 0.0, **metrics})
            if progress_fn is not None and lead:
                progress_fn(0, dict(metrics))
        for it in range(start, num_iterations):
            t_iter = time.time()
            ts, train_metrics = built.iterate(ts, hp)
            train_metrics = {k: float(v) for k, v in jax.device_get(train_metrics).items()}
            done_iters = it + 1
            num_steps = done_iters * steps_per_iter
            simulated += steps_per_iter * sims_per_step(min(max(train_metrics["bundled_fraction"], 0.0), 1.0))
            train_metrics["simulated_steps"] = simulated
            bundled += steps_per_iter * train_metrics["bundled_fraction"]
            train_metrics["bundled_steps"] = bundled
            skipped = int(ts.skipped)
            if skipped > skipped_seen and lead:
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
            if log is not None:
                log(num_steps, row)
            if bar is not None:
                bar.update(steps_per_iter)
                postfix["steps/s"] = f"{steps_per_iter / max(time.time() - t_iter, 1e-9):.0f}"
                bar.set_postfix(postfix, refresh=False)
            if done_iters in eval_iters and progress_fn is not None and lead:
                progress_fn(num_steps, dict(metrics))
            due = done_iters in eval_iters if checkpoint_every == 0 else done_iters % checkpoint_every == 0
            if checkpoint_dir is not None and (due or done_iters == num_iterations):
                host = checkpoint.host_state(ts)  # a collective across processes: every one gathers
                if lead:
                    checkpoint.save_checkpoint(
                        checkpoint.checkpoint_path(checkpoint_dir, done_iters),
                        host,
                        {**meta, "num_steps": num_steps, "simulated_steps": simulated, "bundled_steps": bundled},
                    )
    finally:
        if bar is not None:
            bar.close()
        if log is not None:
            log.close()
    if jax.process_count() > 1:
        # Every process returns once process 0's checkpoints and log are complete on disk.
        multihost_utils.sync_global_devices("bcg_envs.learners.shac.train: files written")

    metrics["training/walltime"] = time.time() - t0
    metrics["num_steps"] = num_iterations * steps_per_iter
    metrics["skipped_updates"] = int(ts.skipped)
    metrics["simulated_steps"] = simulated
    metrics["bundled_steps"] = bundled
    params = jax.device_get({"normalizer": ts.normalizer, "actor": ts.actor, "critic": ts.critic})
    return make_policy, params, metrics
