"""Per-episode MJX model fields: draws in MuJoCo Playground's ``randomization_fn`` shape.

A *randomization function* ``fn(model: mjx.Model, rng: jax.Array) -> (model, in_axes)``
takes the env's MJX model and a batch of keys (``(n, 2)``) and returns the model with a
leading axis of size ``n`` on every field it randomized, plus ``in_axes``: a model-shaped
tree with ``0`` at those fields and ``None`` everywhere else (the pair a vmapping wrapper
needs). Playground's functions have this shape and can be passed as they are.

The envs (``MjxEnv(randomize="episode")``) do not vmap over models: ``draw_fields`` calls
the function with one key at every reset and keeps the randomized fields (only those) in
``state.info`` as ``"model/<field>"`` entries, and the physics substitutes them into its
model at each step (``Physics.with_model_fields``). So every element of a batch carries
its own model fields, and an autoreset (a fresh ``reset``) redraws them.

``mass_constants`` recomputes what MuJoCo derives from masses when a model is compiled
(``mj_setConst``) and MJX's step reads: subtree masses and the inverse weights that scale
constraint softness.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

#: ``fn(model, rng) -> (model with a leading batch axis on its randomized fields, in_axes)``;
#: ``rng`` is a batch of keys, ``(n, 2)``.
RandomizationFn = Callable[[mjx.Model, jax.Array], Tuple[mjx.Model, Any]]

#: Prefix of the ``state.info`` entries that hold an episode's model fields.
INFO_PREFIX = "model/"


def batched_fields(model: mjx.Model, in_axes: Any) -> Dict[str, jax.Array]:
    """The leaves of ``model`` that ``in_axes`` marks as batched (``0``), by attribute
    path (``"body_mass"``, ``"opt.timestep"``: what ``mjx.Model.tree_replace`` takes)."""
    fields: Dict[str, jax.Array] = {}
    marked = jax.tree_util.tree_flatten_with_path(in_axes)[0]  # None leaves drop out
    values = {path: leaf for path, leaf in jax.tree_util.tree_flatten_with_path(model)[0]}
    for path, axis in marked:
        name = ".".join(getattr(k, "name", str(k)) for k in path)
        if axis != 0:
            raise ValueError(f"in_axes of a randomization function must be 0 or None, got {axis!r} at {name!r}")
        if path not in values:
            raise ValueError(f"in_axes marks {name!r}, which is not an array field of the model")
        fields[name] = values[path]
    if not fields:
        raise ValueError("the randomization function's in_axes marks no field of the model with 0")
    return fields


def draw_fields(fn: RandomizationFn, model: mjx.Model, key: jax.Array) -> Dict[str, jax.Array]:
    """One draw of ``fn``'s randomized fields (no batch axis), from one key."""
    batched, in_axes = fn(model, key[None])
    fields = batched_fields(batched, in_axes)
    out = {}
    for name, value in fields.items():
        base = _field(model, name)
        if value.shape != (1,) + tuple(np.shape(base)):
            raise ValueError(
                f"randomized field {name!r} has shape {value.shape}; expected (1,) + the model's "
                f"{tuple(np.shape(base))} for one key"
            )
        out[name] = jnp.asarray(value[0], jnp.result_type(base))
    return out


def as_info(fields: Mapping[str, jax.Array]) -> Dict[str, jax.Array]:
    """Model fields as ``state.info`` entries."""
    return {INFO_PREFIX + name: value for name, value in fields.items()}


def from_info(info: Mapping[str, Any]) -> Optional[Dict[str, jax.Array]]:
    """The model fields held in ``info`` (None when it holds none)."""
    fields = {k[len(INFO_PREFIX) :]: v for k, v in info.items() if k.startswith(INFO_PREFIX)}
    return fields or None


def _field(model: mjx.Model, name: str):
    value = model
    for part in name.split("."):
        value = getattr(value, part)
    return value


def _ancestors(parent: np.ndarray) -> np.ndarray:
    """``(nbody, nbody)`` 0/1: ``[j, i]`` = 1 where body j is body i or one of its ancestors."""
    n = len(parent)
    out = np.eye(n)
    for i in range(1, n):
        j = int(parent[i])
        while True:
            out[j, i] = 1.0
            if j == 0:
                break
            j = int(parent[j])
    return out


def mass_constants(model: mjx.Model) -> Dict[str, jax.Array]:
    """``body_subtreemass`` (kg), ``body_invweight0`` and ``dof_invweight0`` of ``model``
    (after its masses, inertias or armature changed), as ``mj_setConst`` computes them at
    ``qpos0``: a body's inverse weights are the mean translational and rotational diagonal
    of ``J M^-1 J^T`` at its center of mass, a dof's the mean diagonal of ``M^-1`` over its
    joint's translational or rotational dofs. MJX scales every constraint's
    regularization (contact softness) by them, so randomized masses need them redrawn too.
    Dense ``M^-1``: meant for models of tens of dofs (G1: 35)."""
    data = mjx.make_data(model).replace(qpos=jnp.asarray(model.qpos0))
    data = mjx.crb(model, mjx.com_pos(model, mjx.kinematics(model, data)))
    minv = jnp.linalg.inv(mjx.full_m(model, data))
    mass = jnp.asarray(model.body_mass)
    subtree = jnp.asarray(_ancestors(np.asarray(model.body_parentid)), mass.dtype) @ mass

    def body(i):
        jacp, jacr = mjx.jac(model, data, data.xipos[i], i)
        jac = jnp.concatenate([jacp.T, jacr.T])  # (6, nv)
        a = jac @ minv @ jac.T
        tran, rot = jnp.trace(a[:3, :3]) / 3, jnp.trace(a[3:, 3:]) / 3
        tiny = mujoco.mjMINVAL
        tran, rot = (
            jnp.where((tran < tiny) & (rot > tiny), rot, tran),
            jnp.where((rot < tiny) & (tran > tiny), tran, rot),
        )
        return jnp.stack([tran, rot])

    weights = jax.vmap(body)(jnp.arange(model.nbody))
    static = np.asarray(model.body_weldid) == 0
    simple = np.asarray(model.body_simple) == 2
    weights = jnp.where(static[:, None], 0.0, weights)
    simple_weights = jnp.stack([1.0 / jnp.maximum(mujoco.mjMINVAL, mass), jnp.zeros_like(mass)], axis=1)
    weights = jnp.where(simple[:, None] & ~static[:, None], simple_weights, weights)

    diag = jnp.diagonal(minv)
    dof = diag
    for j, kind in enumerate(np.asarray(model.jnt_type)):
        adr = int(model.jnt_dofadr[j])
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            dof = dof.at[adr : adr + 3].set(jnp.mean(diag[adr : adr + 3]))
            dof = dof.at[adr + 3 : adr + 6].set(jnp.mean(diag[adr + 3 : adr + 6]))
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            dof = dof.at[adr : adr + 3].set(jnp.mean(diag[adr : adr + 3]))
    return {"body_subtreemass": subtree, "body_invweight0": weights, "dof_invweight0": dof}
