"""stable-baselines3 PPO on any bcg_envs id, with VecNormalize and success-rate evaluation.

Uses the MuJoCo C backend (``backend="mujoco"``, the CPU fast path, no XLA compile).
``EvalCallback`` logs ``eval/mean_reward`` and ``eval/success_rate`` (from each
evaluation episode's final ``info["is_success"]``) and keeps the best model in ``--out``.

    python examples/sb3_ppo.py --env bcg_envs/BoxPush-v0 --steps 200000 --out runs/sb3_boxpush
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

import bcg_envs  # noqa: F401  (registers the bcg_envs/* ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env", default="bcg_envs/BoxPush-v0", help="Gymnasium id (bcg-envs list)")
    parser.add_argument("--steps", type=int, default=200_000, help="env steps of training")
    parser.add_argument("--n-envs", type=int, default=8, help="parallel training envs")
    parser.add_argument("--eval-freq", type=int, default=10_000, help="env steps between evaluations")
    parser.add_argument("--eval-episodes", type=int, default=10, help="episodes per evaluation")
    parser.add_argument("--n-steps", type=int, default=256, help="PPO rollout length per env")
    parser.add_argument("--seed", type=int, default=0, help="seed of envs and PPO")
    parser.add_argument(
        "--out",
        default="runs/sb3_ppo",
        help="folder for evaluations.npz, best_model.zip, vecnormalize.pkl and the final model",
    )
    args = parser.parse_args()

    env_kwargs = {"backend": "mujoco"}
    env = VecNormalize(make_vec_env(args.env, n_envs=args.n_envs, seed=args.seed, env_kwargs=env_kwargs))
    # Evaluation uses the training statistics (EvalCallback syncs them) and raw rewards.
    eval_env = VecNormalize(
        make_vec_env(args.env, n_envs=1, seed=args.seed + 1000, env_kwargs=env_kwargs),
        training=False,
        norm_reward=False,
    )
    out = Path(args.out)
    callback = EvalCallback(
        eval_env,
        n_eval_episodes=args.eval_episodes,
        eval_freq=max(args.eval_freq // args.n_envs, 1),
        log_path=str(out),
        best_model_save_path=str(out),
        deterministic=True,
    )
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=args.n_steps,
        batch_size=min(64, args.n_steps * args.n_envs),
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    model.learn(total_timesteps=args.steps, callback=callback)
    model.save(out / "final_model")
    env.save(str(out / "vecnormalize.pkl"))
    success = callback.evaluations_successes[-1] if callback.evaluations_successes else []
    print(
        f"{args.env}: last evaluation mean return {callback.last_mean_reward:.2f}, success rate "
        f"{sum(success) / max(len(success), 1):.2f} over {len(success)} episodes; outputs in {out}"
    )


if __name__ == "__main__":
    main()
