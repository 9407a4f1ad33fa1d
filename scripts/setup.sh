#!/usr/bin/env bash
# Create .venv with everything bcg_envs, its tests and the baselines need (CPU only).
set -euo pipefail
cd "$(dirname "$0")/.."
# Headless rendering uses Mesa's EGL; install it where the machine lacks it (Debian/Ubuntu).
if ! ldconfig -p 2>/dev/null | grep -q 'libEGL.so.1'; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq libegl1 libgl1 libegl-mesa0 >/dev/null
  else
    echo "warning: libEGL not found; rendering (render_mode='rgb_array') will fail" >&2
  fi
fi
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# The CPU build of torch first, from PyTorch's CPU index: PyPI's Linux torch is a multi-GB
# CUDA build. Where that index's host does not resolve, the configured indexes are asked
# instead (pip would retry the dead host five times for every package, ~8 s each).
if python -c "import socket; socket.getaddrinfo('download.pytorch.org', 443)" 2>/dev/null; then
  python -m pip install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
else
  python -m pip install -q torch==2.13.0
fi
python -m pip install -q -e ".[baselines,onnx,dev]"
