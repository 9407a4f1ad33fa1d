"""Private MJX, in one place.

MJX keeps the contacts and constraint rows of ``mjx.Data`` under ``mjx.Data._impl``, and
some functions this package needs live only in ``mujoco.mjx._src``: the Newton solver's
context (``implicit_step``), the actuator-activation update (``moreau_contact``),
quaternion algebra (``tangent``) and the contact and constraint-row layout of
``mjx.put_data`` (``mujoco_backend.mjx_layout``). That is private API and changes between
releases, so every private MJX import and ``_impl`` access of ``bcg_envs`` goes through
the public functions here. They are written for MuJoCo/MJX ``MJX_VERSION`` (pyproject.toml
pins it); ``check_version`` says when the installed release differs. Public MJX
(``mjx.full_m``, ``mjx.jac``) is used directly where it covers the need.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Tuple, Union

import jax
import mujoco
import numpy as np
from mujoco import mjx
from mujoco.mjx._src import collision_driver, constraint, forward, solver, types
from mujoco.mjx._src import io as mjx_io
from mujoco.mjx._src import math as mjx_math
from mujoco.mjx._src import support as mjx_support

#: The MuJoCo/MJX release the wrappers below were written for.
MJX_VERSION = "3.17.0"

#: What ``check_version`` asks to recheck before moving ``MJX_VERSION``.
WRAPPED = (
    "mujoco.mjx._src.solver.Context.create(...).Mgrad",
    "mujoco.mjx._src.forward._next_activation",
    "mujoco.mjx._src.math.quat_mul / quat_inv",
    "mujoco.mjx._src.collision_driver.make_condim",
    "mujoco.mjx._src.constraint.make_efc_type / make_efc_address / counts",
    "mjx.Data._impl.contact / efc_force / efc_J",
    "mujoco.mjx._src.io / support: module name jax (device_put, default_backend), io._resolve_impl_and_device",
)


def check_version(installed: str = mujoco.__version__) -> None:
    """Raise ``RuntimeError`` when ``installed`` is not ``MJX_VERSION``: the private names
    wrapped here may then be missing or mean something else."""
    if installed != MJX_VERSION:
        raise RuntimeError(
            f"bcg_envs.physics.mjx_private was written for MuJoCo/MJX {MJX_VERSION}, but {installed} "
            f"is installed: recheck {', '.join(WRAPPED)} (names, signatures and meaning; "
            "tests/physics/test_mjx_private.py compares them with MuJoCo C), then update MJX_VERSION "
            "here and the pins in pyproject.toml"
        )


# --------------------------------------------------------------------------------------
# mjx.Data._impl
# --------------------------------------------------------------------------------------
def contact(d: mjx.Data) -> Any:
    """MJX's fixed-size contact slots of ``d`` (fields ``dist`` (m), ``pos``, ``frame``,
    ``friction``, ``geom``, ``dim``, ``efc_address``; empty slots have ``dist`` 1e10)."""
    return d._impl.contact


def efc_force(d: mjx.Data) -> jax.Array:
    """Constraint-row forces (N or N m) of ``d`` in MJX's row layout, shape (nefc,)."""
    return d._impl.efc_force


def with_efc_force(d: mjx.Data, force: jax.Array) -> mjx.Data:
    """``d`` with its constraint-row forces replaced by ``force`` (nefc,)."""
    return d.tree_replace({"_impl.efc_force": force})


def has_constraint_rows(d: mjx.Data) -> bool:
    """Whether the constraint Jacobian of ``d`` has any entry (static: MJX sizes it by model)."""
    return d._impl.efc_J.size != 0


# --------------------------------------------------------------------------------------
# mujoco.mjx._src functions
# --------------------------------------------------------------------------------------
def newton_direction(m: mjx.Model, d: mjx.Data) -> jax.Array:
    """``H^-1 g`` (m/s^2 or rad/s^2, (nv,)) of MuJoCo's constrained cost at ``d.qacc``: the
    gradient ``g`` and Hessian ``H`` of the Gauss and constraint terms at that point's
    active set, as the Newton solver forms them (needs ``opt.solver = Newton``)."""
    return solver.Context.create(m, d, grad=True).Mgrad


def next_activation(m: mjx.Model, d: mjx.Data, act_dot: jax.Array) -> jax.Array:
    """Actuator activations after one timestep at rate ``act_dot`` (MuJoCo's rule: Euler,
    or exact for ``filterexact``, clamped to ``actrange``), shape (na,)."""
    return forward._next_activation(m, d, act_dot)


def quat_mul(u: jax.Array, v: jax.Array) -> jax.Array:
    """Hamilton product ``u * v`` of two (w, x, y, z) quaternions, shape (4,)."""
    return mjx_math.quat_mul(u, v)


def quat_inv(q: jax.Array) -> jax.Array:
    """Conjugate of the (w, x, y, z) quaternion ``q`` (its inverse for a unit ``q``)."""
    return mjx_math.quat_inv(q)


def contact_condims(model: Union[mujoco.MjModel, mjx.Model]) -> np.ndarray:
    """condim of every MJX contact slot (MJX's JAX implementation), shape (slots,)."""
    return np.asarray(collision_driver.make_condim(model, impl=types.Impl.JAX))


def efc_types(model: mujoco.MjModel, dims: np.ndarray) -> np.ndarray:
    """Constraint type of every row of MJX's fixed-size constraint arrays, given the slot
    condims ``dims``."""
    return constraint.make_efc_type(model, dims)


def efc_addresses(model: mujoco.MjModel, dims: np.ndarray, efc_type: np.ndarray) -> np.ndarray:
    """First constraint row of every contact slot, shape (slots,)."""
    return np.asarray(constraint.make_efc_address(model, dims, efc_type))


def efc_counts(efc_type: np.ndarray) -> Tuple[int, int, int, int]:
    """(equality, friction loss, limit, contact) row counts of ``efc_type``."""
    ne, nf, nl, nc = constraint.counts(efc_type)
    return int(ne), int(nf), int(nl), int(nc)


# --------------------------------------------------------------------------------------
# MJX without JAX's runtime
# --------------------------------------------------------------------------------------
class _JaxWithoutDevice:
    """The ``jax`` module as MJX's ``io`` and ``support`` see it inside ``without_device``:
    the same, but ``device_put`` makes arrays without placing them (under ``jax.eval_shape``
    they stay abstract) and the default backend is named ``"cpu"`` without starting one (MJX asks only to choose
    a dense or sparse mass matrix, which no observation or action shape depends on)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(jax, name)

    @staticmethod
    def device_put(x: Any, device: Any = None, **kwargs: Any) -> Any:
        return jax.tree.map(jax.numpy.asarray, x)

    @staticmethod
    def default_backend() -> str:
        return "cpu"


_without_device_lock = threading.Lock()


@contextlib.contextmanager
def without_device() -> Iterator[None]:
    """Inside, ``mjx.put_model`` and ``mjx.make_data`` choose no device: under
    ``jax.eval_shape`` they trace to abstract arrays.

    Why: choosing a device starts JAX's runtime and its thread pools, after which a forked
    process hangs in JAX. Reading an env's shapes (``jax.eval_shape`` of ``reset``) needs
    neither a device nor the runtime, so Gymnasium's ``AsyncVectorEnv`` can build an env in
    its parent to read the spaces and still fork its workers. MJX has no public switch for
    this; the context swaps three module names of ``mujoco.mjx._src`` for its duration (one
    thread at a time). See ``abstract_model``."""
    with _without_device_lock:
        saved = mjx_io.jax, mjx_support.jax, mjx_io._resolve_impl_and_device
        mjx_io.jax = mjx_support.jax = _JaxWithoutDevice()
        mjx_io._resolve_impl_and_device = lambda impl=None, device=None: (types.Impl.JAX, None)
        try:
            yield
        finally:
            mjx_io.jax, mjx_support.jax, mjx_io._resolve_impl_and_device = saved


def contact_layout(model: mujoco.MjModel) -> Tuple[np.ndarray, np.ndarray]:
    """(first constraint row, condim) of every MJX contact slot of ``model`` (what
    ``mjx.make_data`` puts in ``Data._impl.contact``), from NumPy alone."""
    dims = contact_condims(model)
    return efc_addresses(model, dims, efc_types(model, dims)), dims


def abstract_model(model: mujoco.MjModel) -> mjx.Model:
    """``mjx.put_model(model)`` with every device array a ``jax.ShapeDtypeStruct`` (the
    static NumPy fields as they are): an argument for ``jax.eval_shape`` that reads an env's
    shapes without a device (run the evaluation inside ``without_device``)."""
    with without_device():
        return jax.eval_shape(lambda: mjx.put_model(model))
