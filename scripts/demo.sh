#!/usr/bin/env bash
# The main job (~8-9 minutes on 2 cores, most of it XLA compiles): gradient statistics of
# every estimator along a scripted BoxPush push in MuJoCo C (table, gradients.png, rollout.mp4),
# then a small training comparison on BoxPush -- SB3 PPO vs SHAC with BCG gradients,
# TRAIN_STEPS env steps each (default 16384) -- printed as a table and
# plotted to demo_out/compare/curves.png; then the shipped BoxPush policies of SB3 PPO and SHAC
# exact (2,097,152 env steps each) on the comparison's 64 evaluation episodes; last, the shipped
# G1Jump policies of SB3 PPO and SHAC exact (the same 262,144 env steps each) scored on 192
# MuJoCo C episodes -> success table and demo_out/g1jump_success.png.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export JAX_COMPILATION_CACHE_DIR="$PWD/.jax_cache" JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
bcg-envs demo --out demo_out "$@"
python -m baselines.compare --env BoxPush-v0 --algos sb3_ppo shac_bcg --seeds 0 \
    --steps "${TRAIN_STEPS:-16384}" --evals 4 --out demo_out/compare
for policy in trained trained_shac; do
    python -m bcg_envs.envs.box_push.scripted --policy $policy --episodes 64 --seed 1000000
done
python -m bcg_envs.envs.g1.scripted --env G1Jump-v0 --policies trained trained_shac --episodes 192 --seed 0 \
    --plot demo_out/g1jump_success.png
