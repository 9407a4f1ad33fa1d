"""The package imports quietly and exposes its public names."""

import subprocess
import sys


def test_import_prints_nothing():
    """MJX's "Failed to import warp" line (no GPU backend on CPU installs) stays hidden."""
    out = subprocess.run([sys.executable, "-c", "import bcg_envs"], capture_output=True, text=True, check=True)
    assert out.stdout == ""
    assert "warp" not in out.stderr


def test_public_names():
    import bcg_envs

    assert {"BundleConfig", "ESTIMATORS", "list_envs", "make_jax"} <= set(bcg_envs.__all__)
    assert len(bcg_envs.list_envs()) == 6
