#!/usr/bin/env bash
# Set up and run the tests: the default tier, or the integration tier with `-m integration`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
python -m pytest -q -n 2 --dist loadfile --durations=20 "$@"  # the 20 slowest tests at the end
