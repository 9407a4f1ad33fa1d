"""bcg_envs/mujoco_backend/mjx_layout.py: the one home of the backend's private MJX
imports, pinned to the MuJoCo/MJX release it was written for."""

import re
from pathlib import Path

import mujoco
import numpy as np
import pytest
from mujoco import mjx

import bcg_envs
from bcg_envs.mujoco_backend import mjx_layout
from bcg_envs.registry import make_jax

PACKAGE = Path(bcg_envs.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_written_for_the_installed_mujoco():
    """Fails with what to check when MuJoCo/MJX is not the release the layout was written for."""
    mjx_layout.check_version()
    assert mujoco.__version__ == mjx_layout.MJX_VERSION


def test_version_pin_matches_pyproject():
    if not PYPROJECT.exists():
        pytest.skip("no pyproject.toml next to the package (installed copy)")
    text = PYPROJECT.read_text()
    for dist in ("mujoco", "mujoco-mjx"):
        pins = re.findall(rf'"{dist}==([0-9.]+)"', text)
        assert pins == [mjx_layout.MJX_VERSION], (
            f"pyproject.toml pins {dist} to {pins}; mjx_layout.MJX_VERSION is {mjx_layout.MJX_VERSION}: "
            "recheck the private layout before moving either"
        )


def test_another_version_fails_with_a_clear_message():
    with pytest.raises(RuntimeError, match=r"written for MuJoCo/MJX 3\.17\.0, but 9\.9\.9 is installed"):
        mjx_layout.check_version("9.9.9")


def test_only_the_adapter_imports_private_mjx():
    """Private MJX modules and ``mjx.Data._impl`` paths appear in the adapter only."""
    for needle in (r"^\s*(from|import)\s+mujoco\.mjx\._src", r"[\"']_impl[\"']"):
        users = sorted(p.name for p in (PACKAGE / "mujoco_backend").glob("*.py") if re.search(needle, p.read_text(), re.M))
        assert users == ["mjx_layout.py"], (needle, users)


def test_layout_matches_mjx_data():
    """Slot condims and constraint-row addresses are those of MJX's own data."""
    m = make_jax("BoxPush-v0").mj_model
    contact = mjx.make_data(mjx.put_model(m))._impl.contact
    dims = mjx_layout.contact_dims(m)
    np.testing.assert_array_equal(dims, np.asarray(contact.dim))
    address, counts = mjx_layout.constraint_layout(m, dims)
    np.testing.assert_array_equal(address, np.asarray(contact.efc_address))
    assert all(isinstance(n, int) and n >= 0 for n in counts)
