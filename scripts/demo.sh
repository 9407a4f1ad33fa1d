#!/usr/bin/env bash
# The main job: gradient statistics of every estimator on BoxPush, a plot, a video, and a
# SHAC (exact vs BCG) vs Brax PPO training comparison when TRAIN_STEPS>0 (SHAC is still in
# progress). Writes demo_out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export JAX_COMPILATION_CACHE_DIR="$PWD/.jax_cache" JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
bcg-envs demo --out demo_out --train-steps "${TRAIN_STEPS:-0}" "$@"
