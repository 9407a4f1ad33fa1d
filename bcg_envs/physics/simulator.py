"""MJX physics: model loading, the control step, and per-contact normal forces."""

from __future__ import annotations

import copy
import dataclasses
import threading
from pathlib import Path
from typing import Dict, NamedTuple, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.physics import implicit_step, mjx_private, moreau_contact
from bcg_envs.physics.moreau_contact import MoreauContact
from bcg_envs.physics.penalty_contact import PenaltyContact, disable_constraint_contacts

#: MuJoCo ``solref`` time constants (seconds) of the named contact stiffness presets.
#: Smaller is stiffer; MuJoCo clamps the time constant to at least 2 * timestep, so the
#: stiffest reachable time constant is set by the physics timestep (``physics_dt``).
STIFFNESS_PRESETS = {"soft": 0.05, "default": 0.02, "stiff": 0.008}

#: ``contact_stiffness`` is a preset name, a ``solref`` time constant (s, critically
#: damped mass-spring), or ``(stiffness, damping)`` (MuJoCo's direct form, N/m and N s/m
#: per unit effective mass, written to solref as negative numbers).
ContactStiffness = Union[str, float, Tuple[float, float]]

CONTACT_MODELS = ("mujoco", "penalty", "moreau")
#: The contact models whose contacts are computed outside MuJoCo's constraint solver
#: (sharpness ``kappa``; MJX backend only).
KAPPA_MODELS = ("penalty", "moreau")


def _positive(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive finite number, got {value!r}")
    return float(value)


def solref_of(contact_stiffness: ContactStiffness, timestep: float) -> Tuple[float, Optional[float]]:
    """The ``solref`` pair of a ``contact_stiffness`` argument: ``(time constant, None)``
    (the file's damping ratio kept) or ``(-stiffness, -damping)``."""
    if isinstance(contact_stiffness, (tuple, list)):
        if len(contact_stiffness) != 2:
            raise ValueError(f"contact_stiffness as (stiffness, damping) needs two numbers, got {contact_stiffness!r}")
        k = _positive(contact_stiffness[0], "contact_stiffness stiffness (N/m per unit mass)")
        b = _positive(contact_stiffness[1], "contact_stiffness damping (N s/m per unit mass)")
        return -k, -b
    return stiffness_time_constant(contact_stiffness, timestep), None


def stiffness_time_constant(contact_stiffness: ContactStiffness, timestep: float) -> float:
    """Resolve a preset name or time constant to a ``solref`` time constant (s)."""
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
    if not np.isfinite(value) or value < 2 * timestep - 1e-12:
        raise ValueError(
            f"contact_stiffness time constant must be finite and >= 2 * timestep "
            f"({2 * timestep:g} s; a smaller physics_dt reaches stiffer contact), got {value:g}"
        )
    return value


def load_model(
    xml_path: Union[str, Path],
    contact_stiffness: Optional[ContactStiffness] = "default",
    *,
    physics_dt: Optional[float] = None,
    contact_model: str = "mujoco",
) -> mujoco.MjModel:
    """Load an MJCF file, set the physics timestep (s; the file's when None), and either
    every contact's ``solref`` (``contact_model="mujoco"``) or switch MuJoCo's contact
    constraints off for the penalty and Moreau models (``contact_stiffness`` must then be
    None)."""
    if contact_model not in CONTACT_MODELS:
        raise ValueError(f"contact_model must be one of {CONTACT_MODELS}, got {contact_model!r}")
    model = mujoco.MjModel.from_xml_path(str(xml_path))
    if physics_dt is not None:
        model.opt.timestep = _positive(physics_dt, "physics_dt (s)")
    if contact_model in KAPPA_MODELS:
        if contact_stiffness is not None:
            raise ValueError(
                f"contact_stiffness sets MuJoCo's soft contact; with contact_model={contact_model!r} use kappa"
            )
        disable_constraint_contacts(model)
        return model
    first, second = solref_of("default" if contact_stiffness is None else contact_stiffness, model.opt.timestep)
    for solref in (model.geom_solref, model.pair_solref) if model.npair else (model.geom_solref,):
        solref[:, 0] = first
        if second is not None:
            solref[:, 1] = second
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
    #: The penalty contact model, or None for MuJoCo's contact constraints.
    penalty: Optional[PenaltyContact] = None
    #: The authors' Moreau contact model (``moreau_contact``), or None.
    moreau: Optional[MoreauContact] = None

    def __post_init__(self) -> None:
        if self.penalty is not None and self.moreau is not None:
            raise ValueError("Physics takes one contact model: penalty or moreau, not both")
        implicit_step.check_model(self.mj_model)
        efc_address, contact_dim = mjx_private.contact_layout(self.mj_model)
        object.__setattr__(self, "_efc_address", efc_address)
        object.__setattr__(self, "_contact_dim", contact_dim)
        #: The physics as constructed (``with_contact_stiffness`` starts from it).
        object.__setattr__(self, "original", self)
        #: The contact stiffness when it is traced (custom derivative rules must receive
        #: it as an argument, not close over it), else None.
        object.__setattr__(self, "traced_stiffness", None)
        #: The model fields substituted into ``model`` (``with_model_fields``), else None.
        object.__setattr__(self, "model_fields", None)
        #: This physics before any model fields were substituted.
        object.__setattr__(self, "fieldless", self)
        object.__setattr__(self, "_shapes_only", False)  # see for_shapes

    def __getattr__(self, name: str) -> mjx.Model:
        """The MJX model (``model``), put on the device at first use: ``mjx.put_model``
        starts JAX's runtime, which a process must not have started before it forks workers
        (Gymnasium's ``AsyncVectorEnv`` builds one env in its parent to read the spaces,
        then forks); building an env and reading its shapes (``for_shapes``) do not start it."""
        if name != "model":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        # On a thread of its own: JAX's trace and mesh contexts are per thread, so a first
        # use inside ``jit`` or inside a sharded trainer (Brax PPO's ``"i"`` axis) still stores
        # plain concrete arrays, which every later program of the process can take.
        out: dict = {}

        def put() -> None:
            try:
                out["model"] = mjx.put_model(self.mj_model)
            except BaseException as error:  # re-raised on the caller's thread
                out["error"] = error

        thread = threading.Thread(target=put, name="bcg_envs-put-model")
        thread.start()
        thread.join()
        if "error" in out:
            raise out["error"]
        object.__setattr__(self, "model", out["model"])
        return out["model"]

    def for_shapes(self, model: mjx.Model) -> "Physics":
        """This physics on ``model`` (``mjx_private.abstract_model``'s) for reading shapes
        with ``jax.eval_shape``: its ``make_data`` skips ``mjx.forward``, which fills values,
        not shapes (tracing G1's forward pass took seconds per env)."""
        new = copy.copy(self)
        object.__setattr__(new, "model", model)
        object.__setattr__(new, "original", new)
        object.__setattr__(new, "fieldless", new)
        object.__setattr__(new, "_shapes_only", True)
        return new

    def with_contact_stiffness(self, value: float | jax.Array) -> "Physics":
        """A copy with another contact stiffness: the penalty or Moreau model's ``kappa`` (1/m), or
        under MuJoCo's model every contact's ``solref`` time constant (s; damping ratios
        kept). ``value`` may be a traced scalar, so that one compiled program serves every
        stiffness; a concrete one is checked like the constructor's argument. The MuJoCo C
        model (``mj_model``) keeps the original stiffness."""
        traced = isinstance(value, jax.core.Tracer)
        base = self.original
        new = copy.copy(base)
        object.__setattr__(new, "traced_stiffness", value if traced else None)
        object.__setattr__(new, "fieldless", new)
        if base.penalty is not None:
            kappa = value if traced else float(value)
            object.__setattr__(new, "penalty", dataclasses.replace(base.penalty, kappa=kappa))
            return new
        if base.moreau is not None:
            kappa = value if traced else float(value)
            object.__setattr__(new, "moreau", dataclasses.replace(base.moreau, kappa=kappa))
            return new
        if float(base.mj_model.geom_solref[:, 0].min(initial=1.0)) <= 0:
            raise ValueError(
                "with_contact_stiffness sets solref time constants; this model uses direct (negative) solref"
            )
        tc = value if traced else stiffness_time_constant(float(value), float(base.mj_model.opt.timestep))
        m = base.model
        replaced = {"geom_solref": m.geom_solref.at[:, 0].set(tc)}
        if base.mj_model.npair:
            replaced["pair_solref"] = m.pair_solref.at[:, 0].set(tc)
        object.__setattr__(new, "model", m.replace(**replaced))
        return new

    def with_model_fields(self, fields: Dict[str, jax.Array]) -> "Physics":
        """A copy whose MJX model has ``fields`` (attribute path -> array, e.g. an
        episode's randomized ``body_mass``; ``model_fields.draw_fields``) in place of this
        physics' own, for one env: the per-episode model of domain randomization. The
        arrays may be traced; the custom derivative rules receive them through
        ``traced``. The MuJoCo C model (``mj_model``) keeps its values, and so does every
        static (NumPy) field of the MJX model."""
        base = self.fieldless
        new = copy.copy(base)
        object.__setattr__(new, "model", base.model.tree_replace(dict(fields)))
        object.__setattr__(new, "model_fields", dict(fields))
        return new

    @property
    def traced(self) -> Optional[Tuple[Optional[jax.Array], Optional[Dict[str, jax.Array]]]]:
        """What custom derivative rules take as an argument instead of closing over it
        (JAX cannot lower a custom_vjp that closes over a tracer): None, or
        ``(traced contact stiffness or None, model fields or None)``; ``at`` rebuilds the
        physics from it."""
        if self.traced_stiffness is None and self.model_fields is None:
            return None
        return self.traced_stiffness, self.model_fields

    def at(self, traced: Optional[Tuple[Optional[jax.Array], Optional[Dict[str, jax.Array]]]]) -> "Physics":
        """This physics with the stiffness and model fields ``traced`` (another copy's
        ``traced``, passed as an argument; None: itself)."""
        if traced is None:
            return self
        stiffness, fields = traced
        physics = self if stiffness is None else self.with_contact_stiffness(stiffness)
        return physics if fields is None else physics.with_model_fields(fields)

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
        return data if self._shapes_only else mjx.forward(self.model, data)

    def substep(self, data: mjx.Data) -> mjx.Data:
        """One physics timestep (``implicit_step.step`` with this physics' contact model, or
        ``moreau_contact.step``)."""
        if self.moreau is not None:
            return moreau_contact.step(self.moreau, self.mj_model, self.model, data, self._efc_address)
        return implicit_step.step(self.model, data, self.penalty, self._efc_address)

    def control_step(self, data: mjx.Data, ctrl: jnp.ndarray) -> mjx.Data:
        data = data.replace(ctrl=ctrl)

        def substep(d, _):
            return self.substep(d), None

        data, _ = jax.lax.scan(substep, data, None, length=self.n_substeps)
        return data

    def contact_normal_forces(self, data: mjx.Data) -> jnp.ndarray:
        """Normal force (N) of every contact slot; 0 where the contact is inactive."""
        efc_force = mjx_private.efc_force(data)
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
        return mjx_private.contact(data).geom

    def contact_points(self, data: mjx.Data) -> jnp.ndarray:
        return mjx_private.contact(data).pos


class ContactReport(NamedTuple):
    """What a control step reports about its contacts, per contact slot.

    A contact *event* is a pair of bodies: the normal forces of all slots between the
    same two bodies are summed (a G1 foot's four spheres on the floor are one event), and
    every slot reports its event's force. ``point_force`` is the largest single contact's
    force in the slot's event (the quantity the BCG paper thresholds).
    """

    force: jnp.ndarray  # (ncon,) largest event force over the substeps, N
    points: jnp.ndarray  # (ncon, 3) the slot's contact point at its largest own force
    geoms: jnp.ndarray  # (ncon, 2) the slot's geoms then (-1: never active)
    rise: jnp.ndarray  # (ncon,) largest event force minus the event force at the step's start, N
    point_force: jnp.ndarray  # (ncon,) largest force of one of the event's contacts over the substeps, N


def same_event(physics: Physics, data: mjx.Data) -> jnp.ndarray:
    """(ncon, ncon) bool: slot j is active and between the same two bodies as slot i."""
    geoms = physics.contact_geoms(data).astype(jnp.int32)
    bodies = jnp.sort(jnp.asarray(physics.mj_model.geom_bodyid, jnp.int32)[jnp.maximum(geoms, 0)], axis=1)
    return jnp.all(bodies[:, None, :] == bodies[None, :, :], axis=-1) & jnp.all(geoms >= 0, axis=1)[None, :]


def event_forces(physics: Physics, data: mjx.Data, force: jnp.ndarray) -> jnp.ndarray:
    """Per slot, the summed normal force ``force`` of all slots between the same two
    bodies (the slot's contact event)."""
    return same_event(physics, data).astype(force.dtype) @ force


def _argmax_update(best_force, best_pos, best_geom, force, pos, geom):
    better = force > best_force
    return (
        jnp.where(better, force, best_force),
        jnp.where(better[:, None], pos, best_pos),
        jnp.where(better[:, None], geom, best_geom),
    )


def control_step_with_contacts(physics: Physics, data: mjx.Data, ctrl: jnp.ndarray) -> Tuple[mjx.Data, ContactReport]:
    """``Physics.control_step`` that also reports its contacts (``ContactReport``): per
    slot, the largest event force over the substeps, its rise within the step (from the
    last substep of the previous step, held in ``data``), the largest single-contact force
    of its event, and the contact point and geoms at the substep of the slot's own largest
    force."""
    data = data.replace(ctrl=ctrl)
    ncon = physics.ncon
    start = event_forces(physics, data, physics.contact_normal_forces(data)) if ncon else jnp.zeros(0)
    init = (
        jnp.zeros(ncon, data.qpos.dtype),
        jnp.zeros((ncon, 3), data.qpos.dtype),
        jnp.full((ncon, 2), -1, jnp.int32),
        jnp.zeros(ncon, data.qpos.dtype),
        jnp.zeros(ncon, data.qpos.dtype),
    )

    def substep(carry, _):
        d, (own, pos, geom, event, point) = carry
        d = physics.substep(d)
        force = physics.contact_normal_forces(d)
        own, pos, geom = _argmax_update(
            own, pos, geom, force, physics.contact_points(d), physics.contact_geoms(d).astype(jnp.int32)
        )
        if ncon:
            same = same_event(physics, d)
            event = jnp.maximum(event, same.astype(force.dtype) @ force)
            point = jnp.maximum(point, jnp.max(jnp.where(same, force[None, :], 0.0), axis=1))
        return (d, (own, pos, geom, event, point)), None

    (data, (_, pos, geom, event, point)), _ = jax.lax.scan(substep, (data, init), None, length=physics.n_substeps)
    return data, ContactReport(event, pos, geom, event - start.astype(event.dtype), point)


def refresh(physics: Physics, data: mjx.Data) -> mjx.Data:
    """Recompute position-dependent quantities (xpos, site_xpos, cdof, ...) from qpos."""
    data = mjx.kinematics(physics.model, data)
    return mjx.com_pos(physics.model, data)
