"""PlanarHand-v0: a two-finger planar hand reorients a disc on a table, seen from above.

A fixed palm carries two fingers with two hinge joints each (proximal, distal; 7 cm and
6 cm links: capsules with a sphere fingertip; finger bases 10 cm apart, 10 cm behind the
palm centre). They turn a 3 cm radius, 0.2 kg disc (slide x/y, hinge yaw; table friction
as joint dry friction, like BoxPush: 0.8 N on x/y, 0.016 N m on yaw) toward a target yaw
sampled per episode in +-60 degrees (``goal_yaw_range``), while keeping it near the palm
centre (the origin). The geometry is chosen so that one antipodal grasp can roll the disc
through about +-60 degrees without regrasping (the scripted controller in
``bcg_envs.envs.planar_hand.scripted`` succeeds in 90 % of episodes); targets in +-150
degrees (``config={"goal_yaw_range": np.deg2rad(150)}``) need finger gaiting.
Only finger-disc contacts exist (the palm is drawn, not collided). A disc pushed more
than 10 cm from the palm centre is out of the fingers' reach: the episode terminates.
Control at 25 Hz (10 substeps of 4 ms), 200 steps (8 s).

Action (4): joint position targets in [-1, 1], mapped linearly onto each joint's range
(``ctrl = mid + a * half_range``; proximal [-1.0, 1.0] rad, distal [-1.0, 2.2] rad;
positive angles curl a finger inward) and tracked by MuJoCo position actuators
(torque = kp * (ctrl - q), kp = 1 N m/rad) with joint damping 0.2 N m s/rad and armature
0.001 kg m^2: a servo time constant of about 0.2 s, and at most ~3.2 N m when a finger is
blocked far from its target. Order: left proximal, left distal, right proximal, right
distal.

Observation (21): finger joint angles (4), finger joint velocities (4), disc xy relative
to the palm centre (2), cos/sin of the disc yaw (2), disc velocity (x, y, yaw rate; 3),
cos/sin of the yaw error (yaw - target; 2), left and right fingertip xy relative to the
disc centre (4).

Success (``info["is_success"]``): the disc yaw within ``success_yaw`` (0.1 rad) of the
target while the disc is on the table (within ``drop_distance`` of the palm centre).

Reward (``config["reward_weights"]``): every term lies in [0, 1], so every step pays
between 0 and the sum of the weights: ``orientation`` exp(-(1 - cos yaw error) / 0.1),
``position`` exp(-|disc - palm centre| / 2 cm), ``contact`` exp(-(sum of the
fingertip-to-disc surface gaps) / 1 cm; draws the fingertips onto the disc), ``success``
(1 on a successful step) and ``ctrl`` (1 - |a|^2 / 4, effort saved). Why escaping cannot
pay: the episode ends when the disc leaves the fingers' reach (or the simulation
diverges, a step that pays 0), and no step pays less than 0, so ending early only
forfeits the remaining steps' reward. The fingers cannot push the disc out of reach; only
repeated strikes throw it out, after 100+ steps of low reward (measured over 20 seeds in
``tests/envs/planar_hand/test_hand.py``: escape < nothing < scripted controller).

State: qpos and qvel share the layout (left proximal, left distal, right proximal, right
distal, disc x, disc y, disc yaw); nq = nv = 7, nu = 4, no quaternions, so the tangent
state of ``grad_step`` is x = (qpos, qvel), nx = 14.
"""

from __future__ import annotations

import functools
from typing import Any, Dict

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg_envs.envs.base import MjxEnv
from bcg_envs.envs.resources import ASSETS

#: Disc radius and fingertip sphere radius (m), as in planar_hand.xml.
DISC_RADIUS = 0.03
TIP_RADIUS = 0.012
#: Index of the first disc coordinate in qpos/qvel (x, y, yaw follow).
OBJ = 4


def default_config() -> Dict[str, Any]:
    return {
        "ctrl_dt": 0.04,
        "episode_length": 200,
        "goal_yaw_range": float(np.deg2rad(60.0)),  # target yaw uniform in +-this, rad (150 deg: needs regrasping)
        "start_yaw_range": 0.3,  # disc yaw at reset uniform in +-this, rad
        "start_position_noise": 0.01,  # disc xy at reset uniform in +-this around the palm centre, m
        "finger_noise": 0.1,  # finger joints at reset: open pose + uniform +-this, rad
        "drop_distance": 0.1,  # disc farther than this from the palm centre ends the episode, m
        "success_yaw": 0.1,  # |disc yaw - target| for success (disc on the table), rad
        "reward_weights": {  # every term in [0, 1]
            "orientation": 1.0,  # exp(-(1 - cos yaw error) / 0.1)
            "position": 0.3,  # exp(-|disc - palm centre| / 0.02 m)
            "contact": 0.2,  # exp(-(sum of fingertip-to-disc surface gaps) / 0.01 m)
            "success": 1.0,  # 1 while successful
            "ctrl": 0.05,  # 1 - |a|^2 / 4
        },
    }


#: Finger joint angles at reset before noise (left prox, left dist, right prox, right dist):
#: fingers splayed outward, clear of the disc for every reset sample.
OPEN_POSE = (-0.45, 0.05, -0.45, 0.05)


class PlanarHand(MjxEnv):
    """Two-finger planar hand reorienting a disc (see the module docstring).

    ``default_force_threshold`` (the ``bcg`` trigger, 5 N) is set from contact-event
    forces (all contacts of one finger link with the disc, summed) measured by ``python -m
    baselines.contact_events`` (MuJoCo C, 20 episodes per policy):

    * the scripted controller's steady grasp: median 1.0 N, 99th percentile 1.6 N; it
      places its fingertips with ~2 N (99th percentile 3.7 N): none of it is bundled;
    * uniform random actions (targets jump across the joint range, fingers strike the
      disc at speed): impacts median 6.1 N, 90th percentile 11.9 N; 68 % of them are
      bundled, and 38 % of the steps in sustained contact (hard squeezes);
    * gentle random actions (a quarter of the range; the servos stay near their targets):
      impacts median 2.4 N, sustained contact median 1.5 N, 99th percentiles 5.9 N and
      4.9 N: 1-2 % of them are bundled.

    Holding the disc at the neutral grasp (a = 0) squeezes with about 2.6 N; moving it
    takes ~1 N against 0.8 N of table friction. So bcg leaves the grasp and gentle
    manipulation exact and bundles impacts. ``tests/envs/planar_hand/test_hand.py``
    checks that split under random actions.
    """

    xml_path = ASSETS / "planar_hand" / "planar_hand.xml"
    default_force_threshold = 5.0
    #: Under ``contact_model="moreau"`` (kappa 300 /m) impacts are about half as strong:
    #: random actions' fingertip impacts median 2.8 N (MuJoCo's 6.1 N), gentle actions'
    #: 1.0 N (99th percentile 3.5 N), the scripted grasp's sustained contact below 0.8 N
    #: (99th percentile). At 2.5 N the force trigger bundles 60 % of random actions'
    #: impacts and 32 % of their sustained contact, 1-3 % of gentle actions' contact and
    #: none of the scripted grasp, close to the 5 N split under MuJoCo's contact
    #: (``python -m baselines.contact_events --env PlanarHand-v0 --contact-model moreau
    #: --kappa 300``, 20 episodes per policy).
    moreau_force_threshold = 2.5
    render_camera = "top"

    @staticmethod
    def default_config() -> Dict[str, Any]:
        return default_config()

    # ----- model constants ---------------------------------------------------------------
    @functools.cached_property
    def _tip_sites(self) -> np.ndarray:
        m = self.mj_model
        return np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, n) for n in ("left_tip", "right_tip")])

    @functools.cached_property
    def _ctrl_mid_half(self):
        lo, hi = self.mj_model.actuator_ctrlrange.T.astype(np.float32)
        return (lo + hi) / 2, (hi - lo) / 2

    @property
    def palm_centre(self) -> jax.Array:
        return jnp.zeros(2)

    # ----- rendering ---------------------------------------------------------------------
    def decorate(self, mj_data, info):
        yaw = float(info["goal_yaw"])
        mj_data.mocap_quat[0] = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]

    # ----- task --------------------------------------------------------------------------
    def initial_state(self, key: jax.Array):
        k_pos, k_yaw, k_goal, k_fingers = jax.random.split(key, 4)
        cfg = self.config
        noise = cfg["start_position_noise"]
        obj = self.palm_centre + jax.random.uniform(k_pos, (2,), minval=-noise, maxval=noise)
        yaw = jax.random.uniform(k_yaw, (), minval=-cfg["start_yaw_range"], maxval=cfg["start_yaw_range"])
        goal_yaw = jax.random.uniform(k_goal, (), minval=-cfg["goal_yaw_range"], maxval=cfg["goal_yaw_range"])
        fingers = jnp.array(OPEN_POSE) + jax.random.uniform(
            k_fingers, (4,), minval=-cfg["finger_noise"], maxval=cfg["finger_noise"]
        )
        qpos = jnp.concatenate([fingers, obj, yaw[None]])
        return qpos, jnp.zeros(7), {"goal_yaw": goal_yaw}

    def _tips_rel(self, data) -> jax.Array:
        """Fingertip xy relative to the disc centre, (2, 2) (left, right)."""
        return data.site_xpos[self._tip_sites, :2] - data.qpos[None, OBJ : OBJ + 2]

    def observe(self, data, info):
        q, v = data.qpos, data.qvel
        yaw = q[OBJ + 2]
        err = yaw - info["goal_yaw"]
        return jnp.concatenate(
            [
                q[:OBJ],
                v[:OBJ],
                q[OBJ : OBJ + 2] - self.palm_centre,
                jnp.stack([jnp.cos(yaw), jnp.sin(yaw)]),
                v[OBJ : OBJ + 3],
                jnp.stack([jnp.cos(err), jnp.sin(err)]),
                self._tips_rel(data).ravel(),
            ]
        )

    def reward_terms(self, prev, action, data, info):
        cos_now = jnp.cos(data.qpos[OBJ + 2] - info["goal_yaw"])
        tip_dist = jax.vmap(_norm)(self._tips_rel(data))
        gaps = jnp.maximum(tip_dist - (DISC_RADIUS + TIP_RADIUS), 0.0)
        return {
            "orientation": jnp.exp(-(1.0 - cos_now) / 0.1),
            "position": jnp.exp(-_norm(data.qpos[OBJ : OBJ + 2] - self.palm_centre) / 0.02),
            "contact": jnp.exp(-jnp.sum(gaps) / 0.01),
            "success": self.success(data, info).astype(jnp.float32),
            "ctrl": 1.0 - 0.25 * jnp.sum(action**2),
        }

    def terminated(self, data, info):
        offset = data.qpos[OBJ : OBJ + 2] - self.palm_centre
        return jnp.sum(offset**2) > self.config["drop_distance"] ** 2

    def success(self, data, info):
        """Disc yaw within ``success_yaw`` of the target while the disc is on the table
        (within ``drop_distance`` of the palm centre)."""
        err = jnp.mod(data.qpos[OBJ + 2] - info["goal_yaw"] + jnp.pi, 2 * jnp.pi) - jnp.pi
        return (jnp.abs(err) < self.config["success_yaw"]) & ~self.terminated(data, info)

    def action_to_ctrl(self, action):
        mid, half = self._ctrl_mid_half
        return mid + half * action


def _norm(v: jax.Array) -> jax.Array:
    """Euclidean norm with a finite gradient at zero."""
    return jnp.sqrt(jnp.sum(v**2) + 1e-8)
