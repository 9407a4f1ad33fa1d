#!/usr/bin/env bash
# G1Jump-v0 comparison at the paper's scale on one NVIDIA GPU (CUDA 12, PyPI reachable).
#
#   bash baselines/gpu_g1jump.sh            # STEPS=1966080 SEEDS="0 1 2" by default
#
# Installs the CPU set-up (scripts/setup.sh), then the CUDA plugin of the pinned jaxlib,
# checks that JAX sees the GPU, and runs every algorithm of baselines/compare.py with
# baselines/configs/G1Jump-v0.gpu.json (SHAC: 64 envs x 32-step horizon, actor
# [512, 256, 128]; Brax PPO: 4096 envs x 24-step unrolls). The default budget, 1,966,080
# env steps, is a whole number of every algorithm's updates (10 evaluations of Brax PPO's
# 98,304-step batches), so all train for the same env steps. SB3 PPO runs on the CPU cores
# (MuJoCo C backend). Results: baselines/results/G1Jump-v0/gpu (CSV per run, table.md,
# curves.png). Not yet run on a GPU by this project: see baselines/results/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-1966080}
SEEDS=${SEEDS:-0 1 2}
OUT=${OUT:-baselines/results/G1Jump-v0/gpu}
bash scripts/setup.sh
. .venv/bin/activate
python -m pip install -q "jax[cuda12]==$(python -c 'import jax; print(jax.__version__)')"
python - <<'PY'
import jax
devices = jax.devices()
assert devices[0].platform == "gpu", f"JAX sees no GPU: {devices}"
print("JAX devices:", devices)
PY
export JAX_COMPILATION_CACHE_DIR="$PWD/.jax_cache" JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
# shellcheck disable=SC2086
python -m baselines.compare --env G1Jump-v0 --config baselines/configs/G1Jump-v0.gpu.json \
    --steps "$STEPS" --seeds $SEEDS --evals 10 --out "$OUT"
