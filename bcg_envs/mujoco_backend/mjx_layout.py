"""MJX's private data layout, in one place.

``mjx.put_data`` places C contacts and constraint rows into MJX's fixed slots by the
condim of every potential contact and the row address of every slot; those come from
private MJX functions (version specific, reached through ``bcg_envs.physics.mjx_private``,
the package's one private-MJX import), and the contact and constraint leaves live under
``mjx.Data._impl``. Every ``_impl`` path and every use of MJX's layout in
``bcg_envs.mujoco_backend`` lives here, written for MuJoCo/MJX ``MJX_VERSION`` (the
adapter's pin, which pyproject.toml repeats); ``check_version`` says when the installed one
differs.
"""

from __future__ import annotations

from typing import Optional, Tuple

import mujoco
import numpy as np

from bcg_envs.physics import mjx_private

#: The MuJoCo/MJX release this layout was written for (the private adapter's pin).
MJX_VERSION = mjx_private.MJX_VERSION

#: 1-D constraint arrays of ``mjx.Data._impl`` that ``mjx.put_data`` reorders into MJX's
#: constraint-row layout.
EFC_1D = ("efc_pos", "efc_margin", "efc_frictionloss", "efc_D", "efc_aref", "efc_force")


def check_version(installed: str = mujoco.__version__) -> None:
    """Raise ``RuntimeError`` when ``installed`` is not ``MJX_VERSION``: the private layout
    below may then place contacts differently from ``mjx.put_data``."""
    if installed != MJX_VERSION:
        raise RuntimeError(
            f"bcg_envs.mujoco_backend.mjx_layout was written for MuJoCo/MJX {MJX_VERSION}, but "
            f"{installed} is installed: check that the layout functions of bcg_envs.physics.mjx_private "
            "(mujoco.mjx._src.collision_driver.make_condim, constraint.make_efc_type/make_efc_address/"
            "counts) and _put_contact in mjx._src.io still place contacts and constraint rows the same "
            "way, then update mjx_private.MJX_VERSION"
        )


def contact_dims(model: mujoco.MjModel) -> np.ndarray:
    """condim of every MJX contact slot (MJX's JAX implementation), shape (slots,)."""
    return mjx_private.contact_condims(model)


def constraint_layout(model: mujoco.MjModel, dims: np.ndarray) -> Tuple[np.ndarray, Tuple[int, int, int, int]]:
    """(first constraint row of every contact slot, (ne, nf, nl, nc) row counts) of MJX's
    fixed-size constraint arrays: equality, friction loss, limit and contact rows in that
    order."""
    efc_type = mjx_private.efc_types(model, dims)
    return mjx_private.efc_addresses(model, dims, efc_type), mjx_private.efc_counts(efc_type)


def leaf_source(path: str, size: int, probe: mujoco.MjData) -> Tuple[str, Optional[str]]:
    """How to read the ``mjx.Data`` leaf at ``path`` (``jax.tree_util.keystr``) of ``size``
    entries from a C ``MjData``: ("public", field) for a field of the same size,
    ("contact", field of ``MjData.contact``) for ``_impl.contact.*``, ("efc", field) for
    ``EFC_1D``, else ("slow", None) (only ``mjx.put_data`` knows it)."""
    parts = path.lstrip(".").split(".")
    if parts[0] != "_impl" and len(parts) == 1 and hasattr(probe, parts[0]):
        if np.asarray(getattr(probe, parts[0])).size == size:
            return "public", parts[0]
    if parts[:2] == ["_impl", "contact"] and len(parts) == 3 and hasattr(probe.contact, parts[2]):
        return "contact", parts[2]
    if len(parts) == 2 and parts[0] == "_impl" and parts[1] in EFC_1D:
        return "efc", parts[1]
    return "slow", None


class ContactLayout:
    """``mjx.put_data``'s placement of C contacts and constraint rows into MJX slots."""

    def __init__(self, model: mujoco.MjModel):
        dim = contact_dims(model)
        self.efc_address, (self.ne, self.nf, self.nl, self.nc) = constraint_layout(model, dim)
        self.nefc = self.ne + self.nf + self.nl + self.nc
        self.dim = dim
        self.slots = {int(v): np.flatnonzero(self.dim == v) for v in np.unique(self.dim)}
        self.pyramidal = model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL

    def contact_map(self, d: mujoco.MjData) -> np.ndarray:
        """slot -> C contact index (-1: empty), as ``mjx.put_data`` places them."""
        cmap = -np.ones(self.dim.size, np.int64)
        if d.ncon:
            cdim = d.contact.dim[: d.ncon]
            for v, slots in self.slots.items():
                idx = np.flatnonzero(cdim == v)
                if idx.size > slots.size:
                    raise ValueError(f"unable to place {idx.size} contacts of condim {v} in {slots.size} MJX slots")
                cmap[slots[: idx.size]] = idx
            if np.sum(cmap >= 0) != d.ncon:
                raise ValueError("contact of a condim MJX does not allocate")
        return cmap

    def contact_field(self, d: mujoco.MjData, name: str, shape: Tuple[int, ...], cmap: np.ndarray) -> np.ndarray:
        """``mjx.Data._impl.contact.<name>`` of ``d`` (empty slots as ``put_data`` fills them)."""
        if name == "dim":
            return self.dim.reshape(shape)
        if name == "efc_address":
            return self.efc_address.reshape(shape)
        out = np.zeros(shape)
        if name == "dist":
            out[:] = 1e10
        on = cmap >= 0
        if np.any(on):
            src = np.asarray(getattr(d.contact, name))[cmap[on]]
            out[on] = src.reshape((-1,) + tuple(shape[1:]))
        return out

    def efc_field(self, d: mujoco.MjData, name: str, cmap: np.ndarray) -> np.ndarray:
        """``mjx.Data._impl.<name>`` of ``d`` (an ``EFC_1D`` array) in MJX's row layout."""
        src = np.asarray(getattr(d, name))
        out = np.zeros(self.nefc)
        dst_beg, src_beg = 0, 0
        for size_mjx, size_c in ((self.ne, d.ne), (self.nf, d.nf), (self.nl, d.nl)):
            out[dst_beg : dst_beg + size_c] = src[src_beg : src_beg + size_c]
            dst_beg, src_beg = dst_beg + size_mjx, src_beg + size_c
        if d.ncon:
            c_adr = d.contact.efc_address
            for slot, ci in enumerate(cmap):
                if ci < 0 or c_adr[ci] < 0:
                    continue
                rows = int(self.dim[slot])
                if rows > 1 and self.pyramidal:
                    rows = 2 * (rows - 1)
                o = self.efc_address[slot]
                out[o : o + rows] = src[c_adr[ci] : c_adr[ci] + rows]
        return out
