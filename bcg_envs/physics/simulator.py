"""MJX physics: model loading, the control step, and per-contact normal forces."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Union

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.physics import implicit_step

#: MuJoCo ``solref`` time constants (seconds) of the named contact stiffness presets.
#: Smaller is stiffer; MuJoCo clamps the time constant to at least 2 * timestep.
STIFFNESS_PRESETS = {"soft": 0.05, "default": 0.02, "stiff": 0.008}

ContactStiffness = Union[str, float]


def stiffness_time_constant(contact_stiffness: ContactStiffness, timestep: float) -> float:
    """Resolve a ``contact_stiffness`` argument to a ``solref`` time constant (s)."""
    if isinstance(contact_stiffness, str):
        if contact_stiffness not in STIFFNESS_PRESETS:
            raise ValueError(
                f"contact_stiffness must be one of {sorted(STIFFNESS_PRESETS)} or a solref "
                f"time constant in seconds, got {contact_stiffness!r}"
            )
        value = STIFFNESS_PRESETS[contact_stiffness]
    elif isinstance(contact_stiffness, (int, float)) and not isinstance(contact_stiffness, bool):
        value = float(contact_stiffness)
    else:
        raise ValueError(f"contact_stiffness must be a preset name or a float, got {contact_stiffness!r}")
    if not np.isfinite(value) or value < 2 * timestep:
        raise ValueError(
            f"contact_stiffness time constant must be finite and >= 2 * timestep "
            f"({2 * timestep:g} s), got {value:g}"
        )
    return value


def load_model(xml_path: Union[str, Path], contact_stiffness: ContactStiffness = "default") -> mujoco.MjModel:
    """Load an MJCF file and set every contact's ``solref`` time constant."""
    model = mujoco.MjModel.from_xml_path(str(xml_path))
    tc = stiffness_time_constant(contact_stiffness, model.opt.timestep)
    model.geom_solref[:, 0] = tc
    if model.npair:
        model.pair_solref[:, 0] = tc
    return model


@dataclasses.dataclass(frozen=True, eq=False)
class Physics:
    """An MJX model plus the number of physics substeps per control step.

    ``control_step`` is the unit every estimator differentiates: it holds ``ctrl`` for
    ``n_substeps`` calls of ``mjx.step`` inside one ``lax.scan`` (``implicit_step.step``:
    the same physics, with implicit-function derivatives of the constraint solver).
    """

    mj_model: mujoco.MjModel
    n_substeps: int

    def __post_init__(self) -> None:
        implicit_step.check_model(self.mj_model)
        object.__setattr__(self, "model", mjx.put_model(self.mj_model))
        probe = mjx.make_data(self.model)
        contact = probe._impl.contact
        object.__setattr__(self, "_efc_address", np.asarray(contact.efc_address))
        object.__setattr__(self, "_contact_dim", np.asarray(contact.dim))

    @property
    def dt(self) -> float:
        return float(self.mj_model.opt.timestep) * self.n_substeps

    @property
    def ncon(self) -> int:
        return int(self._efc_address.shape[0])

    def make_data(self, qpos: jnp.ndarray, qvel: jnp.ndarray, act: jnp.ndarray | None = None) -> mjx.Data:
        data = mjx.make_data(self.model)
        data = data.replace(qpos=qpos, qvel=qvel)
        if act is not None and self.mj_model.na:
            data = data.replace(act=act)
        return mjx.forward(self.model, data)

    def control_step(self, data: mjx.Data, ctrl: jnp.ndarray) -> mjx.Data:
        data = data.replace(ctrl=ctrl)

        def substep(d, _):
            return implicit_step.step(self.model, d), None

        data, _ = jax.lax.scan(substep, data, None, length=self.n_substeps)
        return data

    def contact_normal_forces(self, data: mjx.Data) -> jnp.ndarray:
        """Normal force (N) of every contact slot; 0 where the contact is inactive."""
        efc_force = data._impl.efc_force
        pyramidal = self.mj_model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
        forces = []
        for adr, dim in zip(self._efc_address, self._contact_dim):
            if adr < 0:
                forces.append(jnp.zeros((), efc_force.dtype))
            elif pyramidal and dim > 1:
                forces.append(jnp.sum(efc_force[adr : adr + 2 * (dim - 1)]))
            else:
                forces.append(efc_force[adr])
        if not forces:
            return jnp.zeros((0,), efc_force.dtype)
        return jnp.stack(forces)

    def contact_geoms(self, data: mjx.Data) -> jnp.ndarray:
        return data._impl.contact.geom

    def contact_points(self, data: mjx.Data) -> jnp.ndarray:
        return data._impl.contact.pos


def _argmax_update(best_force, best_pos, best_geom, force, pos, geom):
    better = force > best_force
    return (
        jnp.where(better, force, best_force),
        jnp.where(better[:, None], pos, best_pos),
        jnp.where(better[:, None], geom, best_geom),
    )


def control_step_with_contacts(physics: Physics, data: mjx.Data, ctrl: jnp.ndarray):
    """``Physics.control_step`` that also reports, per contact slot, the largest normal
    force over the substeps and the contact point and geoms at that substep."""
    data = data.replace(ctrl=ctrl)
    ncon = physics.ncon
    init = (
        jnp.zeros(ncon, data.qpos.dtype),
        jnp.zeros((ncon, 3), data.qpos.dtype),
        jnp.full((ncon, 2), -1, jnp.int32),
    )

    def substep(carry, _):
        d, best = carry
        d = implicit_step.step(physics.model, d)
        force = physics.contact_normal_forces(d)
        best = _argmax_update(*best, force, physics.contact_points(d), physics.contact_geoms(d).astype(jnp.int32))
        return (d, best), None

    (data, best), _ = jax.lax.scan(substep, (data, init), None, length=physics.n_substeps)
    return data, best


def refresh(physics: Physics, data: mjx.Data) -> mjx.Data:
    """Recompute position-dependent quantities (xpos, site_xpos, cdof, ...) from qpos."""
    data = mjx.kinematics(physics.model, data)
    return mjx.com_pos(physics.model, data)
