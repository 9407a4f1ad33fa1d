#!/usr/bin/env bash
# The README's demo (about 4 minutes on 2 CPU cores after set-up; bcg_envs/demo.py):
# [1/3] gradient statistics of every estimator along a scripted BoxPush push (MuJoCo C)
#       -> demo_out/gradients.md, gradients.png, rollout.mp4;
# [2/3] the shipped BoxPush policies of SB3 PPO and SHAC exact (2,097,152 env steps each) on
#       64 episodes beside the scripted push and doing nothing
#       -> demo_out/boxpush_success.png, boxpush_policies.mp4 (side by side);
# [3/3] the shipped G1Jump policies of SB3 PPO and SHAC exact (262,144 env steps each) on 192
#       episodes beside the open-loop replay and a frozen pose -> demo_out/g1jump_success.png;
# then a three-line summary (demo_out/summary.txt). Extra arguments go to `bcg-envs demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export JAX_COMPILATION_CACHE_DIR="$PWD/.jax_cache" JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
bcg-envs demo --out demo_out "$@"
