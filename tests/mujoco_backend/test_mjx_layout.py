"""bcg_envs/mujoco_backend/mjx_layout.py: the one home of the backend's MJX layout, which
reaches private MJX through bcg_envs.physics.mjx_private and shares its version pin."""

import re
from pathlib import Path

import mujoco
import numpy as np
import pytest
from mujoco import mjx

import bcg_envs
from bcg_envs.mujoco_backend import mjx_layout
from bcg_envs.physics import mjx_private
from bcg_envs.registry import make_jax

PACKAGE = Path(bcg_envs.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_written_for_the_installed_mujoco():
    """Fails with what to check when MuJoCo/MJX is not the release the layout was written for."""
    mjx_layout.check_version()
    assert mujoco.__version__ == mjx_layout.MJX_VERSION == mjx_private.MJX_VERSION


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


def test_only_the_physics_adapter_imports_private_mjx():
    """``mujoco.mjx._src`` is imported by ``bcg_envs/physics/mjx_private.py`` alone in the
    whole package; in the backend, ``mjx.Data._impl`` leaf paths are parsed by the layout only."""
    private = r"^\s*(from\s+mujoco\.mjx\._src|from\s+mujoco\.mjx\s+import\s+_src|import\s+mujoco\.mjx\._src)"
    users = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if re.search(private, p.read_text(), re.M)]
    assert sorted(users) == ["physics/mjx_private.py"], users
    backend = (PACKAGE / "mujoco_backend").glob("*.py")
    users = [p.name for p in backend if re.search(r"[\"']_impl[\"']", p.read_text())]
    assert sorted(users) == ["mjx_layout.py"], users


def test_layout_matches_mjx_data():
    """Slot condims and constraint-row addresses are those of MJX's own data."""
    m = make_jax("BoxPush-v0").mj_model
    contact = mjx.make_data(mjx.put_model(m))._impl.contact
    dims = mjx_layout.contact_dims(m)
    np.testing.assert_array_equal(dims, np.asarray(contact.dim))
    address, counts = mjx_layout.constraint_layout(m, dims)
    np.testing.assert_array_equal(address, np.asarray(contact.efc_address))
    assert all(isinstance(n, int) and n >= 0 for n in counts)
