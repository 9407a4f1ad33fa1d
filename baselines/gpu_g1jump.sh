#!/usr/bin/env bash
# G1Jump-v0 comparison at the paper's scale on one NVIDIA GPU.
#
#   bash baselines/gpu_g1jump.sh [--dry-run] [--smoke | --grid | --finals] [--setup-only] [--no-install] [--cuda 12|13]
#
# 1. Set-up (PyPI reachable): .venv with the CPU build of torch (SB3 PPO runs on the CPU
#    cores), bcg_envs with its baselines extra, then the CUDA build of the jax version
#    pyproject.toml pins: jax[cuda12]==<pin> (NVIDIA driver >= 525), or jax[cuda13] with
#    --cuda 13 (driver >= 580). --no-install skips this and uses .venv (or $PY) as it is.
# 2. Pre-flight (python -m baselines.gpu_check): JAX runs on a GPU with the pinned jax and
#    jaxlib, and every learner trains for exactly the same env steps; stops otherwise.
#    --setup-only stops here.
# 3. Trains SHAC bcg, Brax PPO, SHAC exact and SB3 PPO ($ALGOS) on G1Jump-v0 with
#    baselines.compare and the budget baselines/configs/tuning/equal_effort.json declares
#    for G1Jump (1,966,080 env steps, 10 evaluations, configs/G1Jump-v0.gpu.json), one
#    command per seed and learner, one at a time (comparable wall-clocks), seeds ($SEEDS,
#    default "0 1 2") outermost. Rerunning
#    the script resumes: finished runs are skipped, SHAC and SB3 PPO continue from their
#    checkpoints, Brax PPO restarts. Each run logs to <out>/logs/<algo>_seed<s>.log; a
#    failed run is reported at the end and the others go on. Results in <out> (default
#    baselines/results/G1Jump-v0/gpu, or $OUT): <algo>_seed<s>.csv, table.md, curves.png.
#
# --grid: the G1Jump equal-effort grids instead (baselines/configs/tuning/equal_effort.json:
#   six settings per learner at the same budget, seed 0), with baselines.tune, one learner
#   at a time (<out>/logs/tune_<algo>.log; default out baselines/results/G1Jump-v0/grid),
#   then each complete grid's winner as baselines/configs/finals/G1Jump-v0.<algo>.json.
# --finals: each learner at its grid winner (the files --grid writes; $FINALS for another
#   folder), seeds "0 1 2 3 4" by default, at the same budget, into
#   baselines/results/G1Jump-v0/finals.
# --smoke: the same pipeline in minutes, not for results: configs/G1Jump-v0.gpu_smoke.json,
#   8,192 env steps per learner, 2 evaluations, seed 0, out runs/gpu_smoke; the learners
#   run side by side, each logging to its file, then one command writes their table.
# --dry-run: print every command (set-up, checks, runs) without running any; works
#   without a GPU or a .venv.
set -euo pipefail
case ${OUT:-/} in /*) ;; *) OUT=$PWD/$OUT ;; esac   # a relative $OUT is the caller's
cd "$(dirname "$0")/.."
. baselines/gpu_common.sh

DRY=0 SMOKE=0 INSTALL=1 TRAIN=1 MODE=comparison
CUDA=${CUDA:-12}
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --smoke) SMOKE=1 ;;
    --grid) MODE=grid ;;
    --finals) MODE=finals ;;
    --setup-only) TRAIN=0 ;;
    --no-install) INSTALL=0 ;;
    --cuda) [ $# -ge 2 ] || { echo "gpu_g1jump.sh: --cuda takes 12 or 13" >&2; exit 2; }; CUDA=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "gpu_g1jump.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case $CUDA in
  12|13) ;;
  *) echo "gpu_g1jump.sh: --cuda takes 12 or 13, got '$CUDA'" >&2; exit 2 ;;
esac
if [ "$SMOKE" = 1 ] && [ "$MODE" != comparison ]; then
  echo "gpu_g1jump.sh: --smoke runs the comparison's pipeline; it does not go with --$MODE" >&2
  exit 2
fi

ENV_ID=G1Jump-v0
BASE_PY=${PYTHON:-python3}   # creates .venv and reads the declared budget
JAX_PIN=$(pinned_jax)
TORCH_PIN=$(pinned_torch)
ALGOS=${ALGOS:-shac_bcg brax_ppo shac_exact sb3_ppo}
if [ "$SMOKE" = 1 ]; then
  CONFIG=baselines/configs/G1Jump-v0.gpu_smoke.json STEPS=8192 EVALS=2
  SEEDS=${SEEDS:-0}
  OUT=${OUT:-runs/gpu_smoke}
else
  budget=$("$BASE_PY" -c '
import json, sys
b = json.load(open("baselines/configs/tuning/equal_effort.json"))["budgets"][sys.argv[1]]
print(b["steps"], b["evals"], b["config"])' "$ENV_ID") || {
    echo "gpu_g1jump.sh: cannot read the $ENV_ID budget of baselines/configs/tuning/equal_effort.json with $BASE_PY" >&2
    exit 1
  }
  read -r STEPS EVALS CONFIG <<<"$budget"
  case $MODE in
    comparison) SEEDS=${SEEDS:-0 1 2} OUT=${OUT:-baselines/results/G1Jump-v0/gpu} ;;
    grid) SEEDS=0 OUT=${OUT:-baselines/results/G1Jump-v0/grid} ;;
    finals) SEEDS=${SEEDS:-0 1 2 3 4} OUT=${OUT:-baselines/results/G1Jump-v0/finals} ;;
  esac
fi
GRIDS=baselines/configs/tuning/equal_effort.json FINALS=${FINALS:-baselines/configs/finals}

# The config a learner trains with: its grid winner under --finals, else $CONFIG.
learner_config() {
  if [ "$MODE" = finals ]; then echo "$FINALS/$ENV_ID.$1.json"; else echo "$CONFIG"; fi
}
if [ "$MODE" = finals ] && [ "$DRY" = 0 ]; then
  for algo in $ALGOS; do
    [ -f "$(learner_config "$algo")" ] || {
      echo "gpu_g1jump.sh: no $(learner_config "$algo"): run --grid first (it writes each learner's winner)" >&2
      exit 1
    }
  done
fi

echo "# $ENV_ID on a GPU ($MODE): jax[cuda$CUDA]==$JAX_PIN, $(learner_config '<algo>'), $STEPS env steps per learner, $EVALS evaluations,"
echo "# learners: $ALGOS; seeds: $SEEDS; out: $OUT"

if [ "$INSTALL" = 1 ]; then
  PY=.venv/bin/python
  if [ -d .venv ]; then
    echo "# .venv exists: installing into it"
  else
    run "$BASE_PY" -m venv .venv
  fi
  run "$PY" -m pip install -q --upgrade pip
  # The CPU build of torch first: PyPI's torch is a multi-GB CUDA build that SB3 does not need.
  run "$PY" -m pip install -q "torch==$TORCH_PIN" --index-url https://download.pytorch.org/whl/cpu
  run "$PY" -m pip install -q -e ".[baselines]"
  # The CUDA plugin of the pinned jaxlib (jax and jaxlib stay at the pin).
  run "$PY" -m pip install -q "jax[cuda$CUDA]==$JAX_PIN"
else
  PY=${PY:-.venv/bin/python}
  if [ "$DRY" = 0 ] && ! [ -x "$PY" ]; then
    echo "gpu_g1jump.sh: --no-install needs a set-up Python, and $PY is not one; run without --no-install or set PY" >&2
    exit 1
  fi
fi

if [ "$DRY" = 1 ] || command -v nvidia-smi >/dev/null; then
  run nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
else
  echo "# warning: nvidia-smi not found; JAX's check below decides" >&2
fi
if [ "$MODE" = finals ]; then  # each learner's own config: check each budget
  for algo in $ALGOS; do
    run "$PY" -m baselines.gpu_check --jax "$JAX_PIN" --env "$ENV_ID" --config "$(learner_config "$algo")" \
        --steps "$STEPS" --evals "$EVALS" --algos "$algo"
  done
else
  # shellcheck disable=SC2086
  run "$PY" -m baselines.gpu_check --jax "$JAX_PIN" --env "$ENV_ID" --config "$CONFIG" --steps "$STEPS" \
      --evals "$EVALS" --algos $ALGOS
fi
[ "$TRAIN" = 1 ] || exit 0

export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$PWD/.jax_cache}
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
# --smoke runs a seed's learners side by side (their compiles dominate), each taking GPU
# memory as it needs it; the comparison runs one at a time, so wall-clocks are comparable.
[ "$SMOKE" = 1 ] && export XLA_PYTHON_CLIENT_PREALLOCATE=false
failed=()
if [ "$MODE" = grid ]; then
  for algo in $ALGOS; do
    cmd=("$PY" -m baselines.tune --env "$ENV_ID" --grids "$GRIDS" --config "$CONFIG" --steps "$STEPS"
         --evals "$EVALS" --seed 0 --algos "$algo" --out "$OUT")
    [ "$algo" = sb3_ppo ] && cmd=(env JAX_PLATFORMS=cpu "${cmd[@]}")
    run_logged "$OUT/logs/tune_$algo.log" "${cmd[@]}" || failed+=("$algo grid")
  done
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "gpu_g1jump.sh: these grids did not finish (see $OUT/logs/): ${failed[*]}; rerun --grid to resume them" >&2
    exit 1
  fi
  # shellcheck disable=SC2086
  run "$PY" -m baselines.tune --env "$ENV_ID" --grids "$GRIDS" --config "$CONFIG" --steps "$STEPS" --evals "$EVALS" \
      --seed 0 --algos $ALGOS --out "$OUT" --write-finals "$FINALS"
  [ "$DRY" = 1 ] || echo "# done: $OUT/tuning.md, $FINALS/$ENV_ID.<algo>.json; next: --finals"
  exit 0
fi
for seed in $SEEDS; do
  pids=() names=()
  for algo in $ALGOS; do
    cmd=("$PY" -m baselines.compare --env "$ENV_ID" --config "$(learner_config "$algo")" --steps "$STEPS"
         --evals "$EVALS" --algos "$algo" --seeds "$seed" --out "$OUT")
    # SB3 PPO is CPU work (MuJoCo C, torch): keep its JAX off the GPU.
    [ "$algo" = sb3_ppo ] && cmd=(env JAX_PLATFORMS=cpu "${cmd[@]}")
    log=$OUT/logs/${algo}_seed$seed.log
    if [ "$SMOKE" = 0 ]; then
      run_logged "$log" "${cmd[@]}" || failed+=("$algo seed $seed")
    else
      echo "+ $(shell_line "${cmd[@]}") >>$(shell_line "$log") 2>&1 &"
      [ "$DRY" = 1 ] && continue
      mkdir -p "$OUT/logs"
      "${cmd[@]}" >>"$log" 2>&1 &
      pids+=($!) names+=("$algo seed $seed")
    fi
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed+=("${names[$i]}")
  done
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "gpu_g1jump.sh: these runs failed (see $OUT/logs/): ${failed[*]}; rerun the script to resume them" >&2
  exit 1
fi
if [ "$SMOKE" = 1 ]; then
  # every run is complete: this only writes the table of them all
  # shellcheck disable=SC2086
  run "$PY" -m baselines.compare --env "$ENV_ID" --config "$CONFIG" --steps "$STEPS" --evals "$EVALS" \
      --algos $ALGOS --seeds $SEEDS --out "$OUT"
fi
[ "$DRY" = 1 ] || echo "# done: $OUT/table.md, $OUT/curves.png"
