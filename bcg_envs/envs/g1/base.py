"""Shared pieces of the Unitree G1 tasks: the env base class, reference motions sampled at
the control rate, and smooth JAX helpers for proprioception, key bodies and foot contact.

``G1Env`` fixes what every G1 task shares: the model (``assets/g1/g1.xml``, 29 position
actuators, 8 foot spheres against the floor), the paper's BCG defaults (contact force
threshold 400 N, stiff contact with a ``solref`` time constant of 0.008 s = 2 * timestep,
bundle horizon H = 2) and the index tables used by the helpers below.

``ReferenceMotion`` turns a :class:`~bcg_envs.envs.g1.motions.MotionClip` (30 fps) into
arrays sampled at the control times ``k * ctrl_dt`` (NumPy, at construction): MuJoCo
``qpos``/``qvel`` of every reference frame, the key-site positions from forward kinematics
and the reference foot contacts. ``as_jax()`` gives them as JAX constants.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Optional, Sequence

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from bcg_envs.envs.base import MjxEnv
from bcg_envs.envs.g1 import constants as C
from bcg_envs.envs.g1 import motions
from bcg_envs.envs.g1.quaternions import quat_normalize, quat_rotate_inverse

# --------------------------------------------------------------------------------------
# Proprioception from the state (qpos, qvel) only: valid on any mjx.Data, including one
# made by ``mjx.put_data`` from a MuJoCo C ``MjData``.
# --------------------------------------------------------------------------------------


def root_quat(data: mjx.Data) -> jax.Array:
    """Unit pelvis quaternion (w, x, y, z) from the free joint's qpos."""
    return quat_normalize(data.qpos[3:7])


def gravity_in_body(data: mjx.Data) -> jax.Array:
    """Unit gravity direction (0, 0, -1) in the pelvis frame."""
    return quat_rotate_inverse(root_quat(data), jnp.array([0.0, 0.0, -1.0], data.qpos.dtype))


def body_linvel(data: mjx.Data) -> jax.Array:
    """Pelvis linear velocity in the pelvis frame (free-joint qvel[0:3] is in world axes)."""
    return quat_rotate_inverse(root_quat(data), data.qvel[0:3])


def body_angvel(data: mjx.Data) -> jax.Array:
    """Pelvis angular velocity in the pelvis frame (free-joint qvel[3:6] is local)."""
    return data.qvel[3:6]


def joint_pos(data: mjx.Data) -> jax.Array:
    """The 29 joint angles (rad), ``constants.JOINT_NAMES`` order."""
    return data.qpos[7:]


def joint_vel(data: mjx.Data) -> jax.Array:
    """The 29 joint velocities (rad/s), ``constants.JOINT_NAMES`` order."""
    return data.qvel[6:]


# --------------------------------------------------------------------------------------
# The env base
# --------------------------------------------------------------------------------------


class G1Env(MjxEnv):
    """Base of the G1 tasks: model, BCG defaults, index tables and contact helpers.

    Defaults (paper): ``default_force_threshold = 400`` N, ``contact_stiffness="stiff"``
    (``solref`` time constant 0.008 s = 2 * timestep), and ``BundleConfig``'s own
    defaults (Cartesian 1 cm / 2 cm/s, B = 10, H = 2).

    The threshold applies to a contact event (a foot on the floor: its four spheres'
    forces summed). Measured with the reference replay (``python -m
    baselines.contact_events``, MuJoCo C, 20 episodes per clip): stance steps carry a
    median 160-230 N per foot (99th percentile 250 N on Squat, 510 N on Kick, 670 N on
    Jump's push-off); Jump's landings after flight reach a median 930 N. At 400 N the
    ``"force"`` trigger bundles 81 % of the landings and 0 / 3 / 14 % of the stance steps
    (Squat / Kick / Jump); ``trigger="onset"`` bundles the same landings and 0 / 1 / 2 %.
    The paper thresholds a single contact (one sphere, ``info["max_point_force"]``): at
    400 N that would bundle 71 % of Jump's landings and none of the stance steps.
    """

    xml_path = C.G1_XML
    default_force_threshold = 400.0
    default_contact_stiffness = "stiff"
    #: The paper's simulation under its own contact model: 4 substeps of 5 ms per 20 ms step.
    moreau_physics_dt = 0.005
    render_camera = "track"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        m = self.mj_model
        self.key_site_ids = np.array([m.site(s).id for s in C.KEY_SITES], np.int32)
        self.foot_geom_ids = np.array([m.geom(g).id for g in C.FOOT_GEOMS], np.int32)
        self.left_foot_geom_ids = np.array([m.geom(g).id for g in C.LEFT_FOOT_GEOMS], np.int32)
        self.right_foot_geom_ids = np.array([m.geom(g).id for g in C.RIGHT_FOOT_GEOMS], np.int32)
        self.foot_sphere_radius = np.asarray(m.geom_size[self.foot_geom_ids, 0], np.float32)
        self.default_pose = np.asarray(C.DEFAULT_POSE, np.float32)

    # ----- helpers on mjx.Data (positions need kinematics: the step refreshes them) -----
    def key_positions(self, data: mjx.Data) -> jax.Array:
        """World positions of ``constants.KEY_SITES`` (torso, hands, feet), (K, 3)."""
        return data.site_xpos[self.key_site_ids]

    def foot_contact_forces(self, data: mjx.Data) -> jax.Array:
        """Total normal force (N) on the (left, right) foot spheres at ``data``'s last
        physics substep.

        Per-slot forces come from ``Physics.contact_normal_forces``; slots are assigned to
        feet by their geoms, so this also works on ``mjx.put_data`` data (which orders
        MuJoCo C contacts differently from MJX's own collision slots).
        """
        force = self.physics.contact_normal_forces(data)
        geom = self.physics.contact_geoms(data)
        feet = []
        for ids in (self.left_foot_geom_ids, self.right_foot_geom_ids):
            on = jnp.any(jnp.isin(geom, jnp.asarray(ids)), axis=-1)
            feet.append(jnp.sum(jnp.where(on, force, 0.0)))
        return jnp.stack(feet)

    def foot_penetration(self, data: mjx.Data) -> jax.Array:
        """Penetration depth (m, >= 0) of each of the 8 foot spheres into the floor (z = 0)."""
        z = data.geom_xpos[self.foot_geom_ids, 2]
        return jnp.maximum(jnp.asarray(self.foot_sphere_radius) - z, 0.0)


def foot_penetration_numpy(model: mujoco.MjModel, mj_data: mujoco.MjData) -> np.ndarray:
    """NumPy twin of ``G1Env.foot_penetration`` for a MuJoCo C ``MjData`` (after kinematics)."""
    ids = np.array([model.geom(g).id for g in C.FOOT_GEOMS])
    return np.maximum(model.geom_size[ids, 0] - mj_data.geom_xpos[ids, 2], 0.0)


# --------------------------------------------------------------------------------------
# Reference motions at the control rate
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ReferenceMotion:
    """A clip sampled at the control times ``t_k = k * dt``, k = 0 .. T-1 (NumPy).

    Attributes:
      qpos: (T, 36) MuJoCo qpos (root xyz, root quaternion w x y z, 29 joint angles).
      qvel: (T, 35) MuJoCo qvel: root linear velocity (world axes), root angular velocity
        (pelvis frame, as MuJoCo's free joint), joint velocities; from the clip's 30 fps
        central differences, interpolated to t_k.
      key_pos: (T, K, 3) world positions of ``constants.KEY_SITES`` by forward kinematics.
      foot_contact: (T, 2) 1.0 where the (left, right) foot's lowest sphere is within
        ``contact_height`` of the floor.
      dt: control period (s).
    """

    qpos: np.ndarray
    qvel: np.ndarray
    key_pos: np.ndarray
    foot_contact: np.ndarray
    dt: float
    name: str = ""

    def __len__(self) -> int:
        return int(self.qpos.shape[0])

    @property
    def num_frames(self) -> int:
        return len(self)

    @property
    def joint_pos(self) -> np.ndarray:
        return self.qpos[:, 7:]

    @property
    def duration(self) -> float:
        return (len(self) - 1) * self.dt

    @classmethod
    def from_clip(
        cls,
        clip: motions.MotionClip,
        dt: float,
        model: Optional[mujoco.MjModel] = None,
        key_sites: Sequence[str] = C.KEY_SITES,
        contact_height: float = 0.01,
    ) -> "ReferenceMotion":
        if not (dt > 0 and math.isfinite(dt)):
            raise ValueError(f"dt must be positive, got {dt}")
        n = int(math.floor(clip.duration / dt + 1e-9)) + 1
        if n < 2:
            raise ValueError(
                f"motion {clip.name!r} lasts {clip.duration:.3f} s: shorter than one control step ({dt} s)"
            )
        t = np.arange(n) * dt
        model = model if model is not None else mujoco.MjModel.from_xml_path(str(C.G1_XML))
        qpos = clip.qpos_at(t)
        # Velocities: interpolate the 30 fps finite differences to the control times.
        x = np.clip(t * clip.fps, 0.0, clip.num_frames - 1)
        i0 = np.minimum(np.floor(x).astype(np.int64), clip.num_frames - 1)
        i1 = np.minimum(i0 + 1, clip.num_frames - 1)
        a = (x - i0)[:, None]

        def interp(v):
            return (1.0 - a) * v[i0] + a * v[i1]

        lin_world = interp(clip.root_lin_vel())
        ang_world = interp(clip.root_ang_vel())
        # World angular velocity -> pelvis frame: R^T w, R of the interpolated root quaternion.
        ang_local = quat_rotate_inverse(qpos[:, 3:7], ang_world)
        qvel = np.concatenate([lin_world, ang_local, interp(clip.joint_vel())], axis=1)

        data = mujoco.MjData(model)
        site_ids = [model.site(s).id for s in key_sites]
        geoms = [[model.geom(g).id for g in side] for side in (C.LEFT_FOOT_GEOMS, C.RIGHT_FOOT_GEOMS)]
        key_pos = np.empty((n, len(site_ids), 3))
        contact = np.empty((n, 2))
        for k in range(n):
            data.qpos[:] = qpos[k]
            mujoco.mj_kinematics(model, data)
            key_pos[k] = data.site_xpos[site_ids]
            for s, ids in enumerate(geoms):
                bottom = np.min(data.geom_xpos[ids, 2] - model.geom_size[ids, 0])
                contact[k, s] = float(bottom < contact_height)
        return cls(qpos=qpos, qvel=qvel, key_pos=key_pos, foot_contact=contact, dt=float(dt), name=clip.name)

    def as_jax(self) -> Dict[str, jax.Array]:
        """The arrays as float32 JAX constants (``qpos``, ``qvel``, ``key_pos``, ``foot_contact``)."""
        return {
            "qpos": jnp.asarray(self.qpos, jnp.float32),
            "qvel": jnp.asarray(self.qvel, jnp.float32),
            "key_pos": jnp.asarray(self.key_pos, jnp.float32),
            "foot_contact": jnp.asarray(self.foot_contact, jnp.float32),
        }


def max_deviation_from_default(reference: ReferenceMotion) -> np.ndarray:
    """Per joint, the largest |q_ref - default pose| over the clip (rad), (29,)."""
    return np.max(np.abs(reference.joint_pos - C.DEFAULT_POSE[None, :]), axis=0)


__all__ = [
    "G1Env",
    "ReferenceMotion",
    "body_angvel",
    "body_linvel",
    "foot_penetration_numpy",
    "gravity_in_body",
    "joint_pos",
    "joint_vel",
    "max_deviation_from_default",
    "root_quat",
]
