"""G1 domain randomization as a JAX function in MuJoCo Playground's ``randomization_fn`` shape.

``domain_randomize(model, rng)`` draws what ``tracking.randomize_model`` draws once per env
instance on the MuJoCo C model, from the same ranges (``config["randomization"]``, by default
``DEFAULT_RANGES``), for a batch of keys: the per-episode randomization of
``make_jax("G1Squat-v0", randomize="episode")``. Per key:

* foot-floor sliding friction ~ U(``friction``) (0.3, 1.2), one value for the eight foot
  spheres (their ``geom_friction`` and the foot-floor contact pairs' two tangential
  ``pair_friction`` entries, which the pairs use);
* every link's mass and inertia x U(``link_mass_scale``) (0.8, 1.2), one factor per link;
* the pelvis mass + U(``base_mass_offset``) (-3, 3) kg (at least 10 % of its scaled mass),
  its inertia scaled with it;
* actuator stiffness kp and damping kv x U(``pd_gain_scale``) (0.8, 1.2), one factor each
  per actuator (``gainprm[0]`` and ``-biasprm[1]`` are kp, ``-biasprm[2]`` is kv);
* then the subtree masses and inverse weights derived from the masses, as MuJoCo's
  ``mj_setConst`` after ``randomize_model`` (``model_fields.mass_constants``).

The push at reset (``push_velocity``) is no model field: ``G1Track.initial_state`` draws it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from mujoco import mjx

from bcg_envs.envs.g1 import constants as C
from bcg_envs.physics.model_fields import mass_constants

#: The model fields ``domain_randomize`` draws (its ``in_axes`` are 0 exactly there).
RANDOMIZED_FIELDS = (
    "geom_friction",
    "pair_friction",
    "body_mass",
    "body_inertia",
    "actuator_gainprm",
    "actuator_biasprm",
    "body_subtreemass",
    "body_invweight0",
    "dof_invweight0",
)

#: The default ranges of ``config["randomization"]`` (the G1 tasks' ``default_config``),
#: each a uniform ``(low, high)``.
DEFAULT_RANGES: Mapping[str, Tuple[float, float]] = {
    "friction": (0.3, 1.2),  # foot-floor sliding friction
    "link_mass_scale": (0.8, 1.2),  # every link's mass and inertia
    "base_mass_offset": (-3.0, 3.0),  # kg added to the pelvis
    "pd_gain_scale": (0.8, 1.2),  # kp and kv of every actuator
}
#: Keys of ``config["randomization"]`` that ``domain_randomize`` reads.
RANGE_KEYS = tuple(DEFAULT_RANGES)


def check_ranges(ranges: Mapping[str, Any]) -> None:
    """``ValueError`` unless every range of ``RANGE_KEYS`` is a ``(low, high)`` pair with
    ``low <= high`` (and the scales positive)."""
    for key in RANGE_KEYS:
        value = ranges.get(key)
        ok = isinstance(value, (tuple, list)) and len(value) == 2 and all(np.isfinite(v) for v in value)
        if not ok or value[0] > value[1]:
            raise ValueError(
                f"config['randomization'][{key!r}] must be a (low, high) pair with low <= high, got {value!r}"
            )
        if key != "base_mass_offset" and value[0] <= 0:
            raise ValueError(
                f"config['randomization'][{key!r}] scales a positive quantity: low must be > 0, got {value!r}"
            )


def _indices(model: mjx.Model) -> Tuple[np.ndarray, np.ndarray, int]:
    """(foot geom ids, foot-floor pair ids, pelvis body id) of a G1 model."""
    foot = np.array([mjx.name2id(model, mjx.ObjType.GEOM, name) for name in C.FOOT_GEOMS])
    floor = mjx.name2id(model, mjx.ObjType.GEOM, C.FLOOR_GEOM)
    if np.any(foot < 0) or floor < 0:
        raise ValueError(f"domain_randomize needs the G1 model's geoms {C.FOOT_GEOMS} and {C.FLOOR_GEOM!r}")
    g1, g2 = np.asarray(model.pair_geom1), np.asarray(model.pair_geom2)
    pairs = np.flatnonzero((np.isin(g1, foot) & (g2 == floor)) | (np.isin(g2, foot) & (g1 == floor)))
    pelvis = mjx.name2id(model, mjx.ObjType.BODY, C.ROOT_BODY)
    return foot, pairs, int(pelvis)


def domain_randomize(
    model: mjx.Model, rng: jax.Array, ranges: Optional[Mapping[str, Any]] = None
) -> Tuple[mjx.Model, mjx.Model]:
    """``(model, in_axes)`` for a batch of keys ``rng`` (``(n, 2)``): ``model`` with a
    leading axis of size n on ``RANDOMIZED_FIELDS`` (one draw per key) and ``in_axes`` 0
    there, None elsewhere. ``ranges``: ``config["randomization"]`` (its ``RANGE_KEYS``;
    None: ``DEFAULT_RANGES``)."""
    ranges = DEFAULT_RANGES if ranges is None else ranges
    check_ranges(ranges)
    foot, pairs, pelvis = _indices(model)
    nbody, nu = model.nbody, model.nu

    def uniform(key, name, shape=()):
        low, high = ranges[name]
        return jax.random.uniform(key, shape, minval=low, maxval=high)

    def draw(key):
        k_friction, k_mass, k_pelvis, k_kp, k_kv = jax.random.split(key, 5)
        friction = uniform(k_friction, "friction")
        geom_friction = model.geom_friction.at[foot, 0].set(friction)
        pair_friction = model.pair_friction.at[pairs, 0:2].set(friction)
        scale = uniform(k_mass, "link_mass_scale", (nbody,)).at[0].set(1.0)  # world
        mass = model.body_mass * scale
        inertia = model.body_inertia * scale[:, None]
        old = mass[pelvis]
        new = jnp.maximum(old + uniform(k_pelvis, "base_mass_offset"), 0.1 * old)
        mass = mass.at[pelvis].set(new)
        inertia = inertia.at[pelvis].multiply(new / old)
        kp = uniform(k_kp, "pd_gain_scale", (nu,))
        kv = uniform(k_kv, "pd_gain_scale", (nu,))
        gainprm = model.actuator_gainprm.at[:, 0].multiply(kp)
        biasprm = model.actuator_biasprm.at[:, 1].multiply(kp).at[:, 2].multiply(kv)
        fields = {
            "geom_friction": geom_friction,
            "pair_friction": pair_friction,
            "body_mass": mass,
            "body_inertia": inertia,
            "actuator_gainprm": gainprm,
            "actuator_biasprm": biasprm,
        }
        fields.update(mass_constants(model.tree_replace(fields)))
        return fields

    batched = model.tree_replace(jax.vmap(draw)(rng))
    in_axes = jax.tree.map(lambda _: None, model).tree_replace({name: 0 for name in RANDOMIZED_FIELDS})
    return batched, in_axes
