"""Test set-up: persistent JAX compile cache and the single-CPU client workaround.

Both must happen before JAX creates its CPU client, so they live here, imported first.
"""

import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_ROOT / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from bcg_envs.utils import single_cpu_client  # noqa: E402

single_cpu_client()


import pytest  # noqa: E402


#: The longest test files (compile-bound), longest first (per-file totals of a fresh-clone
#: CI run in session 6: 460, 420, 320, 260, 260, 190, 170, 165, 120 s), so that `pytest -n 2
#: --dist loadfile` (scripts/test.sh) starts them early on separate workers, not last.
HEAVY_FIRST = (
    "tests/baselines/test_compare.py",
    "tests/envs/planar_hand/test_hand.py",
    "tests/learners/test_shac.py",
    "tests/envs/g1/test_tracking.py",
    "tests/gradients/test_differentiable_step.py",
    "tests/test_mujoco_backend.py",
    "tests/test_jax_api.py",
    "tests/baselines/test_gradient_variance.py",
    "tests/envs/box_push/test_box_push.py",
)


def _rank(item) -> int:
    path = Path(str(item.fspath)).resolve().relative_to(_ROOT).as_posix()
    return HEAVY_FIRST.index(path) if path in HEAVY_FIRST else len(HEAVY_FIRST)


def pytest_collection_modifyitems(config, items):
    """Heavy files first (stable sort); tests marked ``slow`` run only with BCG_SLOW=1."""
    items.sort(key=_rank)
    if os.environ.get("BCG_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow check; run with BCG_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


class _NoSpaceWarnings:
    """Context manager: fail if Gymnasium/SB3 warned about the spaces (or infinite bounds)."""

    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings(record=True)
        self.records = self._ctx.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        bad = [str(w.message) for w in self.records if "space" in str(w.message).lower() or "infinity" in str(w.message)]
        assert not bad, bad


@pytest.fixture
def no_space_warnings():
    """``with no_space_warnings(): check_env(env)`` (shared by the env_checker tests)."""
    return _NoSpaceWarnings
