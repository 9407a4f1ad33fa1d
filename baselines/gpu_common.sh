# Helpers of baselines/gpu_g1jump.sh and baselines/gpu_measure.sh (sourced from the
# repository root; DRY=1 prints commands instead of running them).

# The version pyproject.toml pins for both jax and jaxlib.
pinned_jax() {
  local jax jaxlib
  jax=$(sed -n 's/^ *"jax==\([^"]*\)".*/\1/p' pyproject.toml)
  jaxlib=$(sed -n 's/^ *"jaxlib==\([^"]*\)".*/\1/p' pyproject.toml)
  if [ -z "$jax" ] || [ "$jax" != "$jaxlib" ]; then
    echo "error: pyproject.toml must pin jax and jaxlib to one version (found jax==${jax:-?}, jaxlib==${jaxlib:-?})" >&2
    return 1
  fi
  echo "$jax"
}

# The torch version of the baselines extra in pyproject.toml.
pinned_torch() {
  local torch
  torch=$(sed -n 's/.*"torch==\([^"]*\)".*/\1/p' pyproject.toml | head -n 1)
  if [ -z "$torch" ]; then
    echo "error: pyproject.toml pins no torch version in its baselines extra" >&2
    return 1
  fi
  echo "$torch"
}

# Arguments as one shell line, quoted where needed (copy-pasteable, shlex-parsable).
shell_line() {
  local arg out=()
  for arg in "$@"; do
    if [[ $arg =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then
      out+=("$arg")
    else
      out+=("'${arg//\'/\'\\\'\'}'")
    fi
  done
  printf '%s\n' "${out[*]}"
}

# Print a command; run it unless DRY=1.
run() {
  echo "+ $(shell_line "$@")"
  [ "${DRY:-0}" = 1 ] || "$@"
}

# run, with stdout and stderr also appended to the log file given first.
run_logged() {
  local log=$1
  shift
  echo "+ $(shell_line "$@") 2>&1 | tee -a $(shell_line "$log")"
  [ "${DRY:-0}" = 1 ] && return 0
  mkdir -p "$(dirname "$log")"
  "$@" 2>&1 | tee -a "$log"
}
