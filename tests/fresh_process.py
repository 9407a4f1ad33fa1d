"""Run a snippet in a fresh Python interpreter: no state from other tests (JAX's client,
shims, fork hooks), and a hang fails the test at ``timeout`` instead of blocking the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Optional, Union

import pytest


def run_fresh(
    code: str, cwd: Union[str, Path], timeout: float, env: Optional[Dict[str, str]] = None
) -> subprocess.CompletedProcess:
    """``code`` (dedented) in a new interpreter in ``cwd`` with this environment minus the
    ``BCG_ENVS_CPU*`` settings, plus ``env``; fails the test past ``timeout`` seconds."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("BCG_ENVS_CPU")}
    full_env.update(env or {})
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env=full_env,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the fresh process did not finish within {timeout} s (hang); stderr: {str(err.stderr)[-2000:]}")


def fresh_stdout(code: str, cwd: Union[str, Path], timeout: float, env: Optional[Dict[str, str]] = None) -> str:
    """``run_fresh``'s standard output, after checking that the process succeeded."""
    out = run_fresh(code, cwd, timeout, env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout
