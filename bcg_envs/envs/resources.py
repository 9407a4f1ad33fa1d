"""Where the shipped MJCF models and motion clips are: ``ASSETS`` (package data, found with
``importlib.resources`` so that wheel and editable installs resolve alike)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: ``bcg_envs/assets``: ``box_push/``, ``planar_hand/``, ``g1/`` (MJCF) and ``motions/`` (G1 clips).
ASSETS: Path = Path(str(resources.files("bcg_envs").joinpath("assets")))
