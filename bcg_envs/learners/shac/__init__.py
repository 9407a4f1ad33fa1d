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
replicated. After ``jax.distributed.initialize`` the mesh spans every process's devices:
each process steps its share of the envs, gradients are averaged across processes, and
process 0 alone writes checkpoints and logs. The random stream of iteration ``i`` is ``fold_in(key, i)``, so a run
resumed from a checkpoint follows the same parameter trajectory as an uninterrupted one.

Defaults follow the paper: horizon 32, 64 envs, gamma 0.99,
TD(lambda) 0.95, Adam betas (0.7, 0.95), actor lr 5e-3, critic lr 2e-3, clip 1.0 / 10.0,
critic 16 x 4, actor [512, 256, 128] ELU + LayerNorm; initial log std -1 as in SHAC's
code; target critic alpha 0.2 as in SHAC's Ant, Hopper, Cheetah and CartPole configs (its
humanoid configs use 0.995 with critic lr 5e-4). Choices and departures:

* the linear learning-rate decay (to ``min_lr`` = 1e-5) applies to actor and critic, as
  in SHAC's code (``lr_schedule="constant"`` turns it off);
* the critic MLP, unspecified in the paper summary, defaults to [128, 128];
* the actor's output layer starts small (variance scale 0.01): near-zero initial forces;
* the critic's gradient clip is the BCG paper's 10.0 (SHAC's code clips both at 1.0);
* hidden layers start from Flax's ``lecun_normal`` with zero bias (SHAC's code: PyTorch's
  default, orthogonal for the critic); LayerNorm after each layer makes this minor;
* a bad actor gradient skips the update instead of stopping training (SHAC raises);
* critic minibatches are reshuffled every epoch;
* small tasks want other settings: ``runs.TASK_DEFAULTS`` holds BoxPush's (gamma 0.95,
  actor lr 2e-3, 16 envs x 16 steps, [64, 64] nets).

Modules (the layout of Brax's agents):

* ``train``: the driver ``train`` (argument checks, evaluation schedule, the loop) and
  ``TrainingPrograms`` (the jitted init and iteration), ``ProgramCache``;
* ``losses``: ``rollout_loss`` (actor), ``td_lambda_targets``, ``critic_update``,
  ``polyak_update``;
* ``evaluator``: the deterministic evaluation program;
* ``networks``: ``NetworkConfig``, the actor/critic pair and ``make_inference_fn``;
* ``checkpoint``: save/load/latest checkpoints and ``load_policy`` (the policy from a
  checkpoint alone);
* logging (``progress.csv``, TensorBoard) is ``bcg_envs.learners.progress_log``.

Reading order: ``train.train`` (the driver) -> ``train.TrainingPrograms._iterate`` (the
jitted iteration) -> ``losses.rollout_loss`` / ``losses.td_lambda_targets`` /
``losses.critic_update``.

This package re-exports the public names; ``bcg_envs.learners.shac.train`` is the
function ``train`` (the module's other names: ``from bcg_envs.learners.shac.train
import TrainingPrograms``).
"""

from bcg_envs.learners.shac.checkpoint import (
    CHECKPOINT_PREFIX,
    checkpoint_metadata,
    checkpoint_path,
    host_state,
    latest_checkpoint,
    load_checkpoint,
    load_policy,
    save_checkpoint,
)
from bcg_envs.learners.shac.networks import (
    NetworkConfig,
    Params,
    Policy,
    ShacNetworks,
    inference_fn_from_config,
    make_inference_fn,
    make_shac_networks,
)
from bcg_envs.learners.shac.train import (
    HYPER_KEYS,
    ProgramCache,
    StaticConfig,
    TrainingPrograms,
    TrainState,
    check_env_split,
    make_env,
    step_fn,
    train,
)

__all__ = [
    "CHECKPOINT_PREFIX",
    "HYPER_KEYS",
    "NetworkConfig",
    "Params",
    "Policy",
    "ProgramCache",
    "ShacNetworks",
    "StaticConfig",
    "TrainState",
    "TrainingPrograms",
    "check_env_split",
    "checkpoint_metadata",
    "checkpoint_path",
    "host_state",
    "inference_fn_from_config",
    "latest_checkpoint",
    "load_checkpoint",
    "load_policy",
    "make_env",
    "make_inference_fn",
    "make_shac_networks",
    "save_checkpoint",
    "step_fn",
    "train",
]
