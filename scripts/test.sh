#!/usr/bin/env bash
# Set up and run the test suite (slow checks too when BCG_SLOW=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
python -m pytest -q -n 2 --dist loadfile --durations=20 "$@"  # the 20 slowest tests at the end
