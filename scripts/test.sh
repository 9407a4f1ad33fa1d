#!/usr/bin/env bash
# Set up and run the tests: the default tier, or the integration tier with `-m integration`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
# --max-worker-restart=0: a worker that crashes ends the run with its error. Replacing it
# under --dist loadfile can leave every worker idle until CI's time runs out
# (pytest-dev/pytest-xdist#1378, open in 3.8.0).
python -m pytest -q -n 2 --dist loadfile --max-worker-restart=0 --durations=20 "$@"  # the 20 slowest tests at the end
