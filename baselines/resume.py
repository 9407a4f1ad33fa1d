"""The settings a run's checkpoints were made under, and the check a resume must pass.

A checkpoint continues one run: its budget sets the learning-rate schedule and the
evaluation points, its seed and config the trajectory. A resume under other settings
would splice two runs into one CSV, so the runners write the run's settings beside its
checkpoints (``run.json``) when the run starts and refuse a resume that differs.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from baselines.protocol import config_section

#: The run's settings beside its checkpoints.
SETTINGS_FILE = "run.json"
_MISSING = "(unset)"


def run_settings(learner: str, env_id: str, budget: int, seed: int, cfg: dict, evals: int) -> Dict[str, Any]:
    """What a resumed run must share with the run it continues: learner, env, budget (the
    requested env steps), seed, evaluations, the learner's config section and the env
    arguments (as JSON, so that tuples and lists compare equal)."""
    settings = {
        "learner": learner,
        "env_id": env_id,
        "budget": int(budget),
        "seed": int(seed),
        "evals": int(evals),
        "config": {config_section(learner): cfg[config_section(learner)], "env_kwargs": cfg.get("env_kwargs", {})},
    }
    return json.loads(json.dumps(settings))


def write_json(path: Path, data: Dict[str, Any]) -> None:
    """Write ``data`` atomically (a temporary file, then ``os.replace``): a kill leaves the
    old file or the new one, never a truncated one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_settings(checkpoint_dir: Path) -> Optional[Dict[str, Any]]:
    """The settings written beside the checkpoints; None for checkpoints older than the file."""
    path = Path(checkpoint_dir) / SETTINGS_FILE
    return json.loads(path.read_text()) if path.exists() else None


def differences(saved: Any, now: Any, name: str = "") -> List[str]:
    """``"name saved -> now"`` for every leaf where two settings differ (nested keys named
    as ``config['shac']['actor_lr']``)."""
    if isinstance(saved, dict) and isinstance(now, dict):
        out: List[str] = []
        for key in sorted(set(saved) | set(now), key=str):
            sub = f"{name}[{key!r}]" if name else str(key)
            out += differences(saved.get(key, _MISSING), now.get(key, _MISSING), sub)
        return out
    return [] if saved == now else [f"{name} {saved!r} -> {now!r}"]


def check_resume(checkpoint_dir: Path, saved: Dict[str, Any], now: Dict[str, Any]) -> None:
    """Raise ``ValueError`` naming each setting that differs between the run the checkpoints
    were made for (``saved``) and this one (``now``), and how to start the run afresh. Called
    before the run's CSV is touched, so a refused resume changes nothing."""
    differ = differences(saved, now)
    if differ:
        raise ValueError(
            f"{checkpoint_dir}: the checkpoint was made for other settings (checkpoint -> now: {'; '.join(differ)}); "
            f"rerun with the run's own settings, or delete {checkpoint_dir} to start the run afresh "
            "(its CSV is then rewritten from the start)"
        )


def file_digest(path: Path) -> Optional[str]:
    """SHA-256 of a file's bytes; None if there is no such file."""
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
