"""Train a small torch MLP on BoxPush-v0 by short-horizon backpropagation through time.

The policy maps the start observation to the next ``horizon`` actions (an action chunk);
``bcg_envs.torch.TorchRollout`` rolls the JAX env and back-propagates the return through
it with the chosen gradient estimator. Prints the mean ``horizon``-step return on fixed
evaluation start states before and after training.

    python examples/torch_bptt.py               # about 1 min on 2 CPU cores (exact)
    python examples/torch_bptt.py --estimator bcg
"""

from __future__ import annotations

import argparse
import time

import torch

from bcg_envs.torch import TorchRollout


class ChunkPolicy(torch.nn.Module):
    """obs (N, nobs) -> actions (N, horizon, nu) in [-1, 1]."""

    def __init__(self, obs_mean: torch.Tensor, obs_std: torch.Tensor, action_size: int, horizon: int, hidden: int = 64):
        super().__init__()
        self.shape = (horizon, action_size)
        self.register_buffer("obs_mean", obs_mean)
        self.register_buffer("obs_std", obs_std)
        obs_size = obs_mean.shape[0]
        self.net = torch.nn.Sequential(
            torch.nn.Linear(obs_size, hidden),
            torch.nn.ELU(),
            torch.nn.LayerNorm(hidden),
            torch.nn.Linear(hidden, horizon * action_size),
        )
        torch.nn.init.zeros_(self.net[-1].weight)  # start at zero force
        torch.nn.init.zeros_(self.net[-1].bias)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = (obs - self.obs_mean) / self.obs_std
        return torch.tanh(self.net(x)).reshape(obs.shape[0], *self.shape)


def evaluate(rollout: TorchRollout, policy: ChunkPolicy, seed: int) -> float:
    """Mean return over ``horizon`` steps from the start states of ``seed``."""
    obs = rollout.reset(seed)
    rewards, _ = rollout(policy(obs))  # the gradient path (no extra compile); nothing is stepped
    return float(rewards.detach().sum(dim=1).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env", default="BoxPush-v0", help="environment id")
    parser.add_argument("--estimator", default="exact", help="gradient estimator of the env's backward pass")
    parser.add_argument("--num-envs", type=int, default=8, help="parallel envs per iteration")
    parser.add_argument("--horizon", type=int, default=16, help="control steps per rollout (the BPTT window)")
    parser.add_argument("--iterations", type=int, default=200, help="gradient steps")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate")
    parser.add_argument("--grad-clip", type=float, default=1.0, help="global gradient-norm clip (as SHAC)")
    parser.add_argument("--seed", type=int, default=0, help="torch seed")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    rollout = TorchRollout(args.env, args.num_envs, args.horizon, estimator=args.estimator)
    # Observation statistics of start states (fixed normalizer; seeds apart from training's).
    starts = torch.cat([rollout.reset(seed=20_000 + i).clone() for i in range(8)])
    policy = ChunkPolicy(starts.mean(0), starts.std(0) + 1e-3, rollout.action_size, args.horizon)
    optim = torch.optim.Adam(policy.parameters(), lr=args.lr)
    eval_seed = 10_000
    t0 = time.time()
    before = evaluate(rollout, policy, eval_seed)
    print(
        f"{args.env} ({args.estimator}): {args.horizon}-step return before training {before:.3f} "
        f"(first call compiles: {time.time() - t0:.0f} s)",
        flush=True,
    )
    for it in range(args.iterations):
        obs = rollout.reset(seed=it)  # fresh random start states every iteration
        rewards, _ = rollout(policy(obs))
        loss = -rewards.sum(dim=1).mean()
        optim.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), args.grad_clip)
        optim.step()
        if (it + 1) % 10 == 0 or it == 0:
            print(
                f"  iteration {it + 1:3d}: training return {-loss.item():.3f}, gradient norm {grad_norm:.3g}",
                flush=True,
            )
    after = evaluate(rollout, policy, eval_seed)
    verdict = "improved" if after > before else "did not improve"
    print(f"return {verdict}: {before:.3f} -> {after:.3f} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
