#!/usr/bin/env bash
# Nine minutes of measurements on a GPU, in one go:
#
#   bash baselines/gpu_measure.sh OUT_DIR [--dry-run] [--serial]
#
# 1. the device and the pre-flight of baselines/gpu_check.py (stops without a GPU);
# then five lanes, side by side (G1 programs compile for minutes each, so one after
# another they would not fit):
# 2. throughput: `bcg-envs bench --env G1Jump-v0 --tables step` at 1024, then 4096
#    vmapped envs (env steps/s against raw vmap(mjx.step));
# 3. and 4. rollout gradients: `bcg-envs bench --tables rollout`, 64 envs x 32 steps
#    (SHAC's shape), reverse mode, exact and bcg (grad / forward ratios);
# 5. and 6. SHAC bcg and Brax PPO on G1Jump-v0 with the paper-scale config
#    (configs/G1Jump-v0.gpu.json) for 196,608 env steps each (two Brax PPO batches of
#    4096 x 24; 96 SHAC iterations), seed 0, through baselines.compare.
# The lanes share the GPU, so their timings can read low; --serial runs every step one
# after another (clean timings once the compile cache is warm, e.g. on a second run).
#
# Installs nothing: set up first with `bash baselines/gpu_g1jump.sh --setup-only` (or set
# PY to a Python with the CUDA build of the pinned jax). Every step runs under `timeout`,
# and all of them end within LIMIT_S seconds (default 520); a step cut short keeps what it
# wrote. Writes OUT_DIR/<step>.log, OUT_DIR/compare/ (CSV per run) and
# OUT_DIR/summary.txt. --dry-run prints the commands with their time limits, runs nothing.
set -euo pipefail

DRY=0 SERIAL=0 OUT_DIR=
for arg in "$@"; do
  case $arg in
    --dry-run) DRY=1 ;;
    --serial) SERIAL=1 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "gpu_measure.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    *) [ -z "$OUT_DIR" ] || { echo "gpu_measure.sh: one OUT_DIR, got '$OUT_DIR' and '$arg'" >&2; exit 2; }
       OUT_DIR=$arg ;;
  esac
done
if [ -z "$OUT_DIR" ]; then
  echo "gpu_measure.sh: give the output folder: bash baselines/gpu_measure.sh OUT_DIR [--dry-run]" >&2
  exit 2
fi
case $OUT_DIR in /*) ;; *) OUT_DIR=$PWD/$OUT_DIR ;; esac
cd "$(dirname "$0")/.."
. baselines/gpu_common.sh

LIMIT_S=${LIMIT_S:-520}
KILL_S=10   # grace after a step's limit before it is killed
PY=${PY:-.venv/bin/python}
JAX_PIN=$(pinned_jax)
ENV_ID=G1Jump-v0
CONFIG=baselines/configs/G1Jump-v0.gpu.json
STEPS=196608 EVALS=2
STATUS=$OUT_DIR/steps.txt
if [ "$DRY" = 0 ]; then
  if ! [ -x "$PY" ]; then
    echo "gpu_measure.sh: $PY is not a Python; run bash baselines/gpu_g1jump.sh --setup-only first or set PY" >&2
    exit 1
  fi
  mkdir -p "$OUT_DIR"
  : >"$STATUS"
  export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$PWD/.jax_cache}
  export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
  # Several processes share the GPU: each takes memory as it needs it.
  export XLA_PYTHON_CLIENT_PREALLOCATE=false
fi

# step NAME LIMIT CMD...: CMD under timeout (LIMIT s, less where the total runs short),
# output to OUT_DIR/NAME.log, a status line to OUT_DIR/steps.txt; returns CMD's status.
step() {
  local name=$1 limit=$2 left rc=0 start=$SECONDS
  shift 2
  left=$((LIMIT_S - SECONDS - KILL_S))
  if [ "$DRY" = 0 ] && [ "$left" -lt "$limit" ]; then
    if [ "$left" -lt 15 ]; then
      echo "$name: skipped (the total of $LIMIT_S s is spent)" >>"$STATUS"
      return 0
    fi
    limit=$left
  fi
  echo "+ $(shell_line timeout -k "$KILL_S" "$limit" "$@") >$(shell_line "$OUT_DIR/$name.log") 2>&1"
  [ "$DRY" = 1 ] && return 0
  timeout -k "$KILL_S" "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1 || rc=$?
  case $rc in
    0) echo "$name: ok ($((SECONDS - start)) s)" ;;
    124|137) echo "$name: cut at its limit of $limit s" ;;
    *) echo "$name: failed (exit $rc, see $OUT_DIR/$name.log)" ;;
  esac | tee -a "$STATUS"
  return "$rc"
}

bench=("$PY" -m bcg_envs.cli bench --env "$ENV_ID")
compare=("$PY" -m baselines.compare --env "$ENV_ID" --config "$CONFIG" --steps "$STEPS" --evals "$EVALS" --seeds 0
         --out "$OUT_DIR/compare")
# 4096 envs after 1024: the single-env programs come from the compile cache then.
lane_throughput() {
  step throughput_1024 320 "${bench[@]}" --tables step --num-envs 1024 --estimators exact || true
  step throughput_4096 140 "${bench[@]}" --tables step --num-envs 4096 --estimators exact || true
}
rollout=("${bench[@]}" --tables rollout --rollout-envs 64 --horizon 32 --backward vjp)
lane_rollout_exact() { step rollout_exact 460 "${rollout[@]}" --estimators exact || true; }
lane_rollout_bcg() { step rollout_bcg 460 "${rollout[@]}" --estimators bcg || true; }
lane_shac_bcg() { step compare_shac_bcg 460 "${compare[@]}" --algos shac_bcg || true; }
lane_brax_ppo() { step compare_brax_ppo 460 "${compare[@]}" --algos brax_ppo || true; }
LANES=(lane_throughput lane_rollout_exact lane_rollout_bcg lane_shac_bcg lane_brax_ppo)

echo "# $ENV_ID measurements, at most $LIMIT_S s in all; output in $OUT_DIR"
if [ "$DRY" = 1 ] || command -v nvidia-smi >/dev/null; then
  step nvidia_smi 10 nvidia-smi || true
fi
if ! step device 45 "$PY" -m baselines.gpu_check --jax "$JAX_PIN" --env "$ENV_ID" --config "$CONFIG" \
    --steps "$STEPS" --evals "$EVALS" --algos shac_bcg brax_ppo; then
  cat "$OUT_DIR/device.log" >&2
  exit 1
fi
if [ "$SERIAL" = 1 ]; then
  for lane in "${LANES[@]}"; do "$lane"; done
else
  echo "# the ${#LANES[@]} lanes below run side by side; each runs its steps in order"
  pids=()
  for lane in "${LANES[@]}"; do
    if [ "$DRY" = 1 ]; then
      echo "# ${lane#lane_}:"
      "$lane"
    else
      "$lane" &
      pids+=($!)
    fi
  done
  [ "$DRY" = 1 ] || wait "${pids[@]}"
fi
[ "$DRY" = 1 ] && exit 0

{
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1) || gpu="an unknown GPU"
  echo "# $ENV_ID on ${gpu:-an unknown GPU}, $SECONDS s"
  cat "$STATUS"
  for log in "$OUT_DIR"/throughput_*.log "$OUT_DIR"/rollout_*.log; do
    [ -e "$log" ] && { echo; echo "## $(basename "$log")"; cat "$log"; }
  done
  for csv in "$OUT_DIR"/compare/*_seed0.csv; do
    [ -e "$csv" ] && { echo; echo "## $(basename "$csv")"; cat "$csv"; }
  done
} >"$OUT_DIR/summary.txt"
cat "$OUT_DIR/summary.txt"
if grep -q ': failed' "$STATUS"; then
  exit 1
fi
