"""Per-episode model fields on MuJoCo C: MJX model fields (``bcg_envs.physics.model_fields``'s
draws) written into a C ``MjModel``, so that it steps what MJX steps with them."""

from __future__ import annotations

from typing import Any, Mapping

import mujoco
import numpy as np

#: The constants ``mj_setConst`` derives at ``qpos0`` that MJX's step reads too (the
#: ``*0`` fields of both models but ``dof_M0``, which only MuJoCo C reads).
SET_CONST_FIELDS = (
    "body_subtreemass",
    "body_invweight0",
    "dof_invweight0",
    "tendon_invweight0",
    "tendon_length0",
    "actuator_acc0",
    "actuator_length0",
    "cam_pos0",
    "cam_poscom0",
    "cam_mat0",
    "light_pos0",
    "light_poscom0",
    "light_dir0",
)


def _set_fields(model: mujoco.MjModel, fields: Mapping[str, Any]) -> None:
    """Assign ``fields`` (attribute path -> value) to ``model``, checking names and shapes."""
    for name, value in fields.items():
        *parents, leaf = name.split(".")
        owner = model
        try:
            for part in parents:
                owner = getattr(owner, part)
            current = getattr(owner, leaf)
        except AttributeError:
            raise ValueError(f"randomized field {name!r} has no counterpart in the MuJoCo C model") from None
        value = np.asarray(value)
        if isinstance(current, np.ndarray):
            if current.shape != value.shape:
                raise ValueError(
                    f"randomized field {name!r} has shape {value.shape}; the MuJoCo C model's is {current.shape}"
                )
            current[...] = value
        elif value.shape == ():
            setattr(owner, leaf, value.item())
        else:
            raise ValueError(f"randomized field {name!r} has shape {value.shape}; the MuJoCo C model's is a scalar")


def write_model_fields(model: mujoco.MjModel, data: mujoco.MjData, fields: Mapping[str, Any]) -> None:
    """Write MJX model fields (attribute paths as ``bcg_envs.physics.model_fields.draw_fields``
    names them: ``"body_mass"``, ``"opt.timestep"``) into the C ``model`` (float64 there), so that it
    steps what MJX steps with them. ``mj_setConst`` (``data`` is its scratch, reset after)
    then refreshes ``dof_M0``: MuJoCo C takes the mass matrix of "simple" bodies (a
    slider, a lone free body) from it, not from ``body_mass``, while MJX always computes it
    from the masses. Every other constant keeps the value MJX steps: the drawn one, or the
    model's own where the function drew none (``SET_CONST_FIELDS``)."""
    _set_fields(model, fields)
    kept = {name: getattr(model, name).copy() for name in SET_CONST_FIELDS if name not in fields}
    mujoco.mj_setConst(model, data)
    _set_fields(model, kept)
    _set_fields(model, {name: fields[name] for name in SET_CONST_FIELDS if name in fields})
