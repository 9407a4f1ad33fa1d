"""The repository is formatted and linted as ``pyproject.toml``'s ``[tool.ruff]`` says
(``ruff format``, ``ruff check``; ``.pre-commit-config.yaml`` runs both on commit)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return [exe]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff_passes(args):
    result = subprocess.run(_ruff() + args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        f"ruff {' '.join(args)} fails; run `ruff format . && ruff check --fix .`:\n"
        + (result.stdout + result.stderr)[-3000:]
    )
