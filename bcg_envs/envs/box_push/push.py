"""BoxPush-v0: dynamic planar pushing through a stiff pusher-box contact.

An actuated point pusher (force-controlled slide x/y, 5 N per unit action) pushes a
10 cm, 0.5 kg box (slide x/y, hinge yaw; table friction as joint dry friction) toward a
goal pose sampled per episode. Control at 25 Hz (10 substeps of 4 ms), 200 steps. The
pusher starts behind the box (within ``pusher_angle_spread`` of the line from the goal
through the box), so the task is pushing, not finding a way around the box; a spread of pi
places it anywhere around the box (a harder, exploration-bound task).

Observation (17): pusher xy, pusher velocity, box xy, cos/sin of box yaw, box velocity
(x, y, yaw rate), goal minus box xy, box minus pusher xy, cos/sin of the yaw error.
Action (2): pusher force in [-1, 1] per axis.

Success (``info["is_success"]``): the box centre within ``success_distance`` (2 cm) of the
goal and its yaw within ``success_yaw`` (0.2 rad) of the goal yaw.

Reward (``config["reward_weights"]``): every term lies in [0, 1], so every step pays
between 0 and the sum of the weights: ``progress`` (1 + tanh(box speed toward the goal /
5 cm/s)) / 2 (0.5 at rest), ``distance`` max(0, 1 - |goal - box| / 50 cm), ``yaw``
exp(-(1 - cos yaw error) / 0.05), ``reach`` max(0, 1 - |box - pusher| / 50 cm), ``success``
(1 on a successful step) and ``ctrl`` (1 - |a|^2 / 2, effort saved). The distance terms
are linear (a constant pull at any distance) and ``progress`` rewards pushing toward the
goal: exponential distance terms alone left SHAC with almost no signal at this task's
distances (``tests/learners/shac/test_train.py``). Why escaping cannot pay: the episode ends when
the box leaves the table (or the simulation diverges, a step that pays 0), and no step
pays less than 0, so ending early only forfeits the remaining steps' reward. Over 20
seeds (MuJoCo C): full force through the box ends the episode in ~17 steps with a return
of 24.8, doing nothing returns 275 (200 steps), the scripted push 488
(``tests/envs/box_push/test_push.py``: escape < nothing < scripted on every seed).
"""

from __future__ import annotations

from typing import Any, Dict

import jax
import jax.numpy as jnp
import numpy as np

from bcg_envs.envs.base import MjxEnv
from bcg_envs.envs.resources import ASSETS

#: Box sits inside [-TABLE, TABLE]^2; beyond it the episode terminates.
TABLE = 0.5


def default_config() -> Dict[str, Any]:
    return {
        "ctrl_dt": 0.04,
        "episode_length": 200,
        "goal_distance": (0.15, 0.3),  # metres from the box's start
        "pusher_distance": (0.1, 0.18),  # metres from the box centre at reset
        "pusher_angle_spread": 0.5,  # rad either side of the goal-box line, behind the box
        "success_distance": 0.02,  # box centre to goal for success, m
        "success_yaw": 0.2,  # |box yaw - goal yaw| for success, rad
        "reward_weights": {  # every term in [0, 1]
            "progress": 0.5,  # (1 + tanh(box speed toward the goal / 0.05 m/s)) / 2
            "distance": 1.0,  # max(0, 1 - |goal - box| / 0.5 m)
            "yaw": 0.3,  # exp(-(1 - cos yaw error) / 0.05)
            "reach": 0.5,  # max(0, 1 - |box - pusher| / 0.5 m)
            "success": 1.0,  # 1 while successful
            "ctrl": 0.05,  # 1 - |a|^2 / 2
        },
    }


class BoxPush(MjxEnv):
    xml_path = ASSETS / "box_push" / "box_push.xml"
    #: Pushing a 0.5 kg box against 0.8 N of dry friction takes ~1 N; strikes exceed 10 N.
    #: Measured (``python -m baselines.contact_events``, MuJoCo C, 20 episodes): the
    #: scripted push's sustained contact has median 0.8 N (99th percentile 1.0 N), its
    #: strikes median 24 N (random actions' 14 N, 90th percentile 33 N). At 10 N either
    #: trigger bundles 88 % of the scripted strikes (74 % of random ones), none of the
    #: scripted pushing and 4 % of random actions' sustained contact.
    default_force_threshold = 10.0
    #: Under ``contact_model="moreau"`` (kappa 300 /m) strikes are softer: scripted strikes
    #: median 11.5 N (90th percentile 14.3 N), random actions' 7.1 N, while the scripted
    #: push's sustained contact stays below 1.4 N (99th percentile) and random actions'
    #: below 4.3 N. At 5 N either trigger bundles 79 % of the scripted strikes (65 % of
    #: random ones) and none of the sustained contact (``python -m baselines.contact_events
    #: --env BoxPush-v0 --contact-model moreau --kappa 300``, 20 episodes per policy).
    moreau_force_threshold = 5.0

    @staticmethod
    def default_config() -> Dict[str, Any]:
        return default_config()

    render_camera = "top"

    def decorate(self, mj_data, info):
        mj_data.mocap_pos[0, :2] = info["goal"]
        yaw = float(info["goal_yaw"])
        mj_data.mocap_quat[0] = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]

    def initial_state(self, key: jax.Array):
        k_box, k_yaw, k_goal, k_goal_yaw, k_pusher, k_pdist = jax.random.split(key, 6)
        cfg = self.config
        box = jax.random.uniform(k_box, (2,), minval=-0.15, maxval=0.15)
        yaw = jax.random.uniform(k_yaw, (), minval=-0.5, maxval=0.5)
        angle = jax.random.uniform(k_goal, (), minval=-jnp.pi, maxval=jnp.pi)
        k_dist = jax.random.fold_in(k_goal, 1)  # independent of the goal's direction
        dist = jnp.interp(jax.random.uniform(k_dist, ()), jnp.array([0.0, 1.0]), jnp.array(cfg["goal_distance"]))
        goal = jnp.clip(box + dist * jnp.array([jnp.cos(angle), jnp.sin(angle)]), -0.4, 0.4)
        goal_yaw = jax.random.uniform(k_goal_yaw, (), minval=-0.5, maxval=0.5)
        away = box - goal  # the pusher starts on this side of the box
        spread = cfg["pusher_angle_spread"]
        p_angle = jnp.arctan2(away[1], away[0]) + jax.random.uniform(k_pusher, (), minval=-spread, maxval=spread)
        p_dist = jnp.interp(jax.random.uniform(k_pdist, ()), jnp.array([0.0, 1.0]), jnp.array(cfg["pusher_distance"]))
        pusher = box + p_dist * jnp.array([jnp.cos(p_angle), jnp.sin(p_angle)])
        qpos = jnp.concatenate([pusher, box, yaw[None]])
        return qpos, jnp.zeros(5), {"goal": goal, "goal_yaw": goal_yaw}

    def observe(self, data, info):
        q, v = data.qpos, data.qvel
        yaw_err = q[4] - info["goal_yaw"]
        return jnp.concatenate(
            [
                q[0:2],
                v[0:2],
                q[2:4],
                jnp.stack([jnp.cos(q[4]), jnp.sin(q[4])]),
                v[2:5],
                info["goal"] - q[2:4],
                q[2:4] - q[0:2],
                jnp.stack([jnp.cos(yaw_err), jnp.sin(yaw_err)]),
            ]
        )

    def reward_terms(self, prev, action, data, info):
        return {
            "progress": 0.5
            * (1.0 + jnp.tanh((_goal_distance(prev, info) - _goal_distance(data, info)) / self.dt / 0.05)),
            "distance": jnp.clip(1.0 - _goal_distance(data, info) / 0.5, 0.0, 1.0),
            "yaw": jnp.exp(-(1.0 - jnp.cos(data.qpos[4] - info["goal_yaw"])) / 0.05),
            "reach": jnp.clip(1.0 - _norm(data.qpos[2:4] - data.qpos[0:2]) / 0.5, 0.0, 1.0),
            "success": self.success(data, info).astype(jnp.float32),
            "ctrl": 1.0 - 0.5 * jnp.sum(action**2),
        }

    def terminated(self, data, info):
        return jnp.any(jnp.abs(data.qpos[2:4]) > TABLE)

    def success(self, data, info):
        """Box centre within ``success_distance`` of the goal and yaw within ``success_yaw``."""
        yaw_err = jnp.abs(_wrap(data.qpos[4] - info["goal_yaw"]))
        close = jnp.sum((info["goal"] - data.qpos[2:4]) ** 2) < self.config["success_distance"] ** 2
        return close & (yaw_err < self.config["success_yaw"])

    def action_to_ctrl(self, action):
        return action


def _norm(v: jax.Array) -> jax.Array:
    """Euclidean norm with a finite gradient at zero."""
    return jnp.sqrt(jnp.sum(v**2) + 1e-8)


def _wrap(angle: jax.Array) -> jax.Array:
    """Angle wrapped to [-pi, pi) (rad)."""
    return jnp.mod(angle + jnp.pi, 2 * jnp.pi) - jnp.pi


def _goal_distance(data, info) -> jax.Array:
    return _norm(info["goal"] - data.qpos[2:4])
