"""Regenerate the G1 reference clips g1_jump.csv, g1_squat.csv and g1_kick.csv (30 fps).

Usage (from anywhere):  python assets/motions/make_clips.py [out_dir]
Equivalent to:          python -m bcg_envs.envs.g1.motions [out_dir]

The clips are synthesised from keyframes by ``bcg_envs.envs.g1.motions.make_clip``; root
heights come from forward kinematics of assets/g1/g1.xml (see that module's docstring).
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bcg_envs.envs.g1.motions import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or [str(Path(__file__).resolve().parent)]))
