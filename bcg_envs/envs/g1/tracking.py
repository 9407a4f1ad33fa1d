"""G1 motion tracking (DeepMimic-style): G1Track-v0 (a user clip), G1Jump/Squat/Kick-v0.

The Unitree G1 (29 position-controlled joints) follows a reference clip, sampled at the
50 Hz control rate (``ctrl_dt`` 0.02 s = 5 physics substeps of 0.004 s).

Observation (216 with the default three reference frames):
  proprioception (97): pelvis height (1); gravity direction in the pelvis frame (3);
  pelvis linear (3) and angular (3) velocity in the pelvis frame; joint angles minus the
  default pose (29); joint velocities (29); the last action (29, recovered from the PD
  targets held in ``data.ctrl``; zero on the first step);
  reference at each of ``config["reference_steps"]`` control steps ahead (39 each):
  joint angles minus the default pose (29), reference pelvis height (1), reference pelvis
  orientation relative to the current one (6: first two columns of R^T R_ref), reference
  pelvis position relative to the current one in the pelvis frame (3);
  phase (2): sin and cos of 2 pi * t / clip duration.
Action (29): in [-1, 1]. Residual (default, ``residual_actions``): PD targets
  ``reference pose of the frame the step should reach + action_scale * action``
  (0.5 rad), so action 0 replays the reference joint targets; ``residual_actions=False``:
  ``default_pose + scale * action`` with a per-joint scale wide enough for the whole clip
  (see ``default_config``). Held for the control step.
Reward: weighted sum (weights sum to 1) of exp(-error / sigma) terms in [0, 1]
  (``reward_weights``/``reward_sigmas``): joint positions, joint velocities, pelvis
  position, pelvis orientation, key-body positions (torso, hands, feet; relative to the
  pelvis), and foot contact agreement with the reference (fraction of the two feet whose
  contact state matches). A diverged step pays 0.
Termination: pelvis below ``fall_height`` (0.3 m) or mean key-body position error above
  ``max_tracking_error`` (m, ``None`` disables). Episodes last ``episode_length`` control
  steps (default: the clip's length); the reference holds its last frame once the clip
  is over.
Escape never pays: every step pays between 0 and 1 (no negative reward exists to escape
  from) and termination forfeits the rest of the episode, so an episode that ends at step
  T earns at most T, and falling earns little on the way down (the terms decay with the
  error), while staying near the reference earns up to 1 for each remaining step; a
  diverged step pays 0, ends the episode and counts as a fall. Measured on MuJoCo C over
  20 random starts (``python -m bcg_envs.envs.g1.scripted``), G1Squat-v0: throwing the
  robot off the reference (all actions +1 / -1) scores 0.96 / 1.85 (episodes end after 6 /
  15 steps), standing still (PD targets frozen at the start pose) 67.3, the reference
  replay 123.6.
Success (``info["is_success"]``, every step): at the episode's last step, no fall, no
  early termination and a mean key-body position error over the episode below
  ``success_tracking_error`` (0.1 m); see ``G1Track.success``.
Per-episode metrics in ``info`` (``G1Track.update_info``): ``tracking_error`` (m, running
  mean key-body position error), ``joint_error`` (rad, running mean |q - q_ref|),
  ``fell``, ``clip_completed``.
Starting state: reference-state initialization (``random_start``, default on): a
  uniformly random frame of the clip (never the last), in the reference's position and
  velocity; ``random_start=False`` starts at frame 0.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Dict, Optional, Union

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg_envs.envs.base import merge_config
from bcg_envs.envs.g1 import constants as C
from bcg_envs.envs.g1 import motions
from bcg_envs.envs.g1.base import (
    G1Env,
    ReferenceMotion,
    body_angvel,
    body_linvel,
    gravity_in_body,
    joint_pos,
    joint_vel,
    max_deviation_from_default,
    root_quat,
)
from bcg_envs.envs.g1.quaternions import (
    quat_conj,
    quat_error,
    quat_mul,
    quat_normalize,
    quat_rotate_inverse,
    quat_to_6d,
)
from bcg_envs.envs.g1.randomize import DEFAULT_RANGES, RANGE_KEYS, check_ranges, domain_randomize
from bcg_envs.physics.model_fields import RandomizationFn


def default_config() -> Dict[str, Any]:
    return {
        "ctrl_dt": 0.02,  # 50 Hz: 5 substeps of the model's 0.004 s
        "episode_length": None,  # control steps; None: the clip's length
        # Residual actions (default): PD target = reference joint pose of the frame the step
        # should reach + action_scale * action, so action 0 replays the reference and the
        # policy learns corrections; 0.5 rad covers the corrections a balance controller
        # needs without letting one step swing a joint across its range. False: absolute
        # targets default_pose + scale * action, scale widened per joint to
        # action_scale_from_reference x the clip's largest deviation of that joint from the
        # default pose, so that every reference pose is reachable with |a| < 1 (the squat
        # needs the knees 1.7 rad from the default pose; None: action_scale everywhere).
        "residual_actions": True,
        "action_scale": 0.5,  # rad
        "action_scale_from_reference": 1.25,  # absolute actions only
        "reference_steps": (1, 2, 3),  # reference frames in the observation (steps ahead)
        # Reference-state initialization (DeepMimic): start at a uniformly random frame of
        # the clip (never the last), in the reference state; the episode still lasts
        # episode_length steps and the reference holds its last frame after the clip.
        "random_start": True,
        "fall_height": 0.3,  # m: pelvis below this ends the episode (a fall)
        "max_tracking_error": 0.5,  # m: mean key-body position error ending it (None: off)
        # m: success needs the episode's mean key-body position error below this (and no
        # fall) at the end of the clip; see G1Track.success for the measurements behind it.
        "success_tracking_error": 0.1,
        "foot_contact_force": 5.0,  # N: a foot is in contact above this total normal force
        "reference_contact_height": 0.01,  # m: reference foot in contact below this height
        "reward_weights": {
            "joint_pos": 0.4,
            "joint_vel": 0.1,
            "root_pos": 0.15,
            "root_orient": 0.15,
            "key_body": 0.15,
            "foot_contact": 0.05,
        },
        # error scales of the exp(-error / sigma) terms: sums of squares (rad^2, (rad/s)^2,
        # m^2 over all key bodies) and sin^2(half angle) for the orientation.
        "reward_sigmas": {
            "joint_pos": 0.5,
            "joint_vel": 10.0,
            "root_pos": 0.05,
            "root_orient": 0.025,
            "key_body": 0.05,
        },
        "domain_randomization": False,
        # Model draws once per env instance (from "seed"); make the env with
        # randomize="episode" to draw them at every reset instead (randomize.py).
        "randomization": {
            "seed": 0,  # model parameters are drawn once per env instance from this seed
            # foot friction, link mass scale, pelvis mass offset (kg), PD gain scale
            **DEFAULT_RANGES,
            "push_velocity": 0.5,  # m/s: uniform +- kick of the pelvis xy velocity at reset
        },
    }


#: Running per-episode means in ``info`` (see ``G1Track.update_info``).
EPISODE_ERRORS = ("tracking_error", "joint_error")


class G1Track(G1Env):
    """Track a G1 reference motion (``motion_file=``: a LAFAN1-retargeted G1 CSV).

    ``G1Track(motion_file=path, motion_fps=30.0, config=..., contact_stiffness=...,
    estimator=..., bundle=..., backend=...)``. Without ``motion_file`` it tracks the shipped
    squat clip, so that ``G1Track-v0`` can be made without arguments.

    Domain randomization (off by default), from the ranges of ``config["randomization"]``:
    foot-floor friction U(0.3, 1.2), every link's mass (and inertia) x U(0.8, 1.2), pelvis
    mass + U(-3, 3) kg, actuator kp and kv x U(0.8, 1.2), and a push at reset (pelvis xy
    velocity + U(-0.5, 0.5) m/s, every episode).

    * ``config["domain_randomization"] = True``: the model is drawn ONCE per env instance
      from ``config["randomization"]["seed"]`` (every episode and every vmapped copy share
      it);
    * ``randomize="episode"`` (MJX backend): the model is drawn at every reset, per batch
      element (``randomize.domain_randomize``, or the ``randomization_fn`` given), with the
      push; the per-instance draw is then skipped, so the two do not stack;
    * not implemented: pushes during an episode (the base has no hook between control
      steps), and 0-1 step action latency (``action_to_ctrl`` sees only the current action).
    """

    #: The shipped clip tracked when no ``motion_file`` is given.
    clip_name = "squat"
    #: ``info`` entries that summarize an episode at its last step: mean key-body position
    #: error (m), mean joint error (rad), fell, clip completed (``update_info``).
    episode_metrics = ("tracking_error", "joint_error", "fell", "clip_completed")

    def __init__(
        self,
        *,
        motion_file: Optional[Union[str, Path]] = None,
        motion_fps: float = motions.DEFAULT_FPS,
        config: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        cfg = merge_config(default_config(), config)
        _check_config(cfg)
        if motion_file is None:
            motion_file = motions.clip_path(self.clip_name)
        self.motion_file = Path(motion_file)
        clip = motions.load_csv(self.motion_file, fps=motion_fps)
        kin_model = mujoco.MjModel.from_xml_path(str(self.xml_path))
        self.reference = ReferenceMotion.from_clip(
            clip, cfg["ctrl_dt"], kin_model, contact_height=cfg["reference_contact_height"]
        )
        if cfg["episode_length"] is None:
            cfg["episode_length"] = len(self.reference) - 1
        scale = np.full(C.NUM_JOINTS, float(cfg["action_scale"]))
        deviation = max_deviation_from_default(self.reference)
        if cfg["residual_actions"]:
            #: rad per unit action around the reference pose (residual mode).
            self.residual_scale = scale.astype(np.float32)
            # The physics maps an absolute action wide enough for every reference pose plus
            # the largest residual; physics_action lands the residual action inside it.
            scale = deviation + scale
        else:
            self.residual_scale = None
            if cfg["action_scale_from_reference"] is not None:
                scale = np.maximum(scale, cfg["action_scale_from_reference"] * deviation)
        self.action_scale = scale.astype(np.float32)
        self.action_center = np.asarray(C.DEFAULT_POSE, np.float32)
        super().__init__(config=cfg, **kwargs)

    @property
    def _ref(self) -> Dict[str, jax.Array]:
        """The reference motion's arrays as JAX constants, made where they are used (inside
        the traced task functions) so that building the env does not start JAX's runtime."""
        return self.reference.as_jax()

    @staticmethod
    def default_config() -> Dict[str, Any]:
        return default_config()

    # ----- model ------------------------------------------------------------------------
    def customize_model(self, model: mujoco.MjModel) -> None:
        if self.config["domain_randomization"] and self.randomize is None:
            randomize_model(model, self.config["randomization"])

    def default_randomization_fn(self) -> RandomizationFn:
        """``randomize.domain_randomize`` with the ranges of ``config["randomization"]``."""
        ranges = {k: tuple(self.config["randomization"][k]) for k in RANGE_KEYS}
        check_ranges(ranges)
        return functools.partial(domain_randomize, ranges=ranges)

    @property
    def pushes_at_reset(self) -> bool:
        """Whether ``initial_state`` pushes the pelvis (domain randomization of either kind)."""
        return bool(self.config["domain_randomization"]) or self.randomize == "episode"

    # ----- reference lookup ------------------------------------------------------------
    def ref_index(self, info: Dict[str, Any], ahead: int = 0) -> jax.Array:
        """Reference frame of the state after ``info["step"]`` steps, ``ahead`` later."""
        idx = info["ref_start"] + info["step"] + ahead
        return jnp.clip(idx, 0, len(self.reference) - 1)

    def phase(self, info: Dict[str, Any]) -> jax.Array:
        return self.ref_index(info) / (len(self.reference) - 1)

    # ----- task -------------------------------------------------------------------------
    def initial_state(self, key: jax.Array):
        k_start, k_push = jax.random.split(key)
        n = len(self.reference)
        if self.config["random_start"]:
            start = jax.random.randint(k_start, (), 0, n - 1)
        else:
            start = jnp.zeros((), jnp.int32)
        qpos = self._ref["qpos"][start]
        qvel = self._ref["qvel"][start]
        if self.pushes_at_reset:
            v = self.config["randomization"]["push_velocity"]
            qvel = qvel.at[0:2].add(jax.random.uniform(k_push, (2,), minval=-v, maxval=v))
        return (
            qpos,
            qvel,
            {
                "ref_start": start.astype(jnp.int32),
                **{k: jnp.zeros((), jnp.float32) for k in EPISODE_ERRORS},
                "fell": jnp.zeros((), bool),
                "clip_completed": jnp.zeros((), bool),
            },
        )

    def last_action(self, data, info) -> jax.Array:
        """The previous action, recovered from the PD targets in ``data.ctrl``.

        Residual mode: the targets minus the reference pose the previous step aimed at
        (the frame of the current state), over ``residual_scale``.
        """
        if self.residual_scale is None:
            a = (data.ctrl - jnp.asarray(self.action_center)) / jnp.asarray(self.action_scale)
        else:
            ref = self._ref["qpos"][self.ref_index(info), 7:]
            a = (data.ctrl - ref) / jnp.asarray(self.residual_scale)
        return jnp.where(info["step"] > 0, a, jnp.zeros_like(a))

    def observe(self, data, info):
        q = root_quat(data)
        default = jnp.asarray(self.action_center)
        parts = [
            data.qpos[2:3],
            gravity_in_body(data),
            body_linvel(data),
            body_angvel(data),
            joint_pos(data) - default,
            joint_vel(data),
            self.last_action(data, info),
        ]
        for ahead in self.config["reference_steps"]:
            ref = self._ref["qpos"][self.ref_index(info, ahead)]
            ref_q = quat_normalize(ref[3:7])
            parts += [
                ref[7:] - default,
                ref[2:3],
                quat_to_6d(quat_mul(quat_conj(q), ref_q)),
                quat_rotate_inverse(q, ref[0:3] - data.qpos[0:3]),
            ]
        angle = 2.0 * jnp.pi * self.phase(info)
        parts.append(jnp.stack([jnp.sin(angle), jnp.cos(angle)]))
        return jnp.concatenate(parts)

    def observation_layout(self) -> Dict[str, slice]:
        """Name -> slice of the observation vector (``ref<k>_*`` for k steps ahead)."""
        sizes = [
            ("base_height", 1),
            ("gravity", 3),
            ("base_linvel", 3),
            ("base_angvel", 3),
            ("joint_pos", C.NUM_JOINTS),
            ("joint_vel", C.NUM_JOINTS),
            ("last_action", C.NUM_JOINTS),
        ]
        for k in self.config["reference_steps"]:
            sizes += [
                (f"ref{k}_joint_pos", C.NUM_JOINTS),
                (f"ref{k}_base_height", 1),
                (f"ref{k}_orientation", 6),
                (f"ref{k}_position", 3),
            ]
        sizes.append(("phase", 2))
        layout, start = {}, 0
        for name, n in sizes:
            layout[name] = slice(start, start + n)
            start += n
        return layout

    def tracking_errors(self, data, info) -> Dict[str, jax.Array]:
        """Unscaled tracking errors of ``data`` against the reference frame it should match."""
        idx = self.ref_index(info)
        ref_qpos = self._ref["qpos"][idx]
        ref_qvel = self._ref["qvel"][idx]
        ref_key = self._ref["key_pos"][idx]
        key = self.key_positions(data)
        key_rel = key - data.qpos[None, 0:3]
        ref_rel = ref_key - ref_qpos[None, 0:3]
        return {
            "joint_pos": jnp.sum((joint_pos(data) - ref_qpos[7:]) ** 2),
            "joint_vel": jnp.sum((joint_vel(data) - ref_qvel[6:]) ** 2),
            "root_pos": jnp.sum((data.qpos[0:3] - ref_qpos[0:3]) ** 2),
            "root_orient": quat_error(data.qpos[3:7], ref_qpos[3:7]),
            "key_body": jnp.sum((key_rel - ref_rel) ** 2),
            # mean world-frame key-body distance (m): the termination and sim2sim metric
            "key_body_distance": jnp.mean(jnp.sqrt(jnp.sum((key - ref_key) ** 2, axis=-1) + 1e-12)),
        }

    def reward_terms(self, prev, action, data, info):
        err = self.tracking_errors(data, info)
        sig = self.config["reward_sigmas"]
        terms = {k: jnp.exp(-err[k] / sig[k]) for k in sig}
        in_contact = self.foot_contact_forces(data) > self.config["foot_contact_force"]
        ref_contact = self._ref["foot_contact"][self.ref_index(info)] > 0.5
        terms["foot_contact"] = jnp.mean((in_contact == ref_contact).astype(jnp.float32))
        return terms

    def update_info(self, prev, data, info):
        """Episode metrics after each step: running means (over the episode's steps) of
        the key-body position error ``tracking_error`` (m, world frame, mean over bodies)
        and the joint error ``joint_error`` (rad, mean |q - q_ref| over joints); ``fell``
        (pelvis below ``fall_height`` or a diverged simulation, at any step so far);
        ``clip_completed`` (the reference reached its last frame without a fall)."""
        info = dict(info)
        n = jnp.maximum(info["step"], 1).astype(jnp.float32)
        err = self.tracking_errors(data, info)
        ref = self._ref["qpos"][self.ref_index(info), 7:]
        now = {
            "tracking_error": err["key_body_distance"],
            "joint_error": jnp.mean(jnp.abs(joint_pos(data) - ref)),
        }
        for k in EPISODE_ERRORS:
            info[k] = (info[k] + (now[k] - info[k]) / n).astype(jnp.float32)
        fell = info["fell"] | (data.qpos[2] < self.config["fall_height"]) | info["sim_diverged"]
        info["fell"] = fell
        info["clip_completed"] = info["clip_completed"] | (~fell & (self.ref_index(info) >= len(self.reference) - 1))
        return info

    def success(self, data, info):
        """Tracked the clip: at the episode's last step (truncation), no fall, no early
        termination, and the episode's mean key-body position error ``tracking_error``
        below ``config["success_tracking_error"]`` (0.1 m). False at every earlier step.

        The threshold separates tracking from standing still. MuJoCo C, from the clip's
        first frame, mean key-body error over the episode: replaying the reference joint
        targets (residual action 0) 6.3 cm on the squat (clip completed), 10.3 cm on the
        jump and 10.4 cm on the kick (both cut at step 63 by ``max_tracking_error``: an
        open-loop replay does not balance a flight or a one-legged stance); holding the
        default pose 11.6 / 12.0 / 12.2 cm (completed, no fall). From 20 random start
        frames on the squat the replay succeeds in 85 % of episodes (7.4 cm). For scale,
        the paper reports 13.5 to 42.8 cm for trained policies after sim-to-sim transfer
        (SHAC+BCG vs PPO: run 34.1 vs 42.8, jump 18.6 vs 18.0, fight 13.5 vs 34.3, dance
        18.5 vs 19.0 cm) on longer clips with travelling root motion.
        """
        return (
            info["truncated"]
            & ~info["fell"]
            & ~self.terminated(data, info)
            & (info["tracking_error"] < self.config["success_tracking_error"])
        )

    def terminated(self, data, info):
        fell = data.qpos[2] < self.config["fall_height"]
        limit = self.config["max_tracking_error"]
        if limit is None:
            return fell
        return fell | (self.tracking_errors(data, info)["key_body_distance"] > limit)

    def action_to_ctrl(self, action):
        """PD targets (rad) of an absolute action: ``default_pose + action_scale * action``.

        In residual mode the policy's action goes through ``physics_action`` first.
        """
        return jnp.asarray(self.action_center) + jnp.asarray(self.action_scale) * action

    # ----- residual actions -------------------------------------------------------------
    def reference_target(self, info: Dict[str, Any]) -> jax.Array:
        """Reference joint pose (rad, (29,)) of the frame the coming step should reach."""
        return self._ref["qpos"][self.ref_index(info, 1), 7:]

    def physics_action(self, action: jax.Array, info: Dict[str, Any]) -> jax.Array:
        """The policy's action in [-1, 1] as the absolute action ``action_to_ctrl`` maps.

        Residual mode: PD target ``reference_target(info) + residual_scale * clip(action)``,
        expressed in the absolute map (whose scale covers it, so nothing is clipped twice).
        Absolute mode: the identity. ``info`` is the state's info before the step.
        """
        if self.residual_scale is None:
            return action
        target = self.reference_target(info) + jnp.asarray(self.residual_scale) * jnp.clip(action, -1.0, 1.0)
        return (target - jnp.asarray(self.action_center)) / jnp.asarray(self.action_scale)


class G1Jump(G1Track):
    """Track the shipped jump clip (``assets/motions/g1_jump.csv``)."""

    clip_name = "jump"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(motion_file=motions.clip_path(self.clip_name), **kwargs)


class G1Squat(G1Track):
    """Track the shipped squat clip (``assets/motions/g1_squat.csv``)."""

    clip_name = "squat"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(motion_file=motions.clip_path(self.clip_name), **kwargs)


class G1Kick(G1Track):
    """Track the shipped front-kick clip (``assets/motions/g1_kick.csv``)."""

    clip_name = "kick"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(motion_file=motions.clip_path(self.clip_name), **kwargs)


# --------------------------------------------------------------------------------------


def randomize_model(model: mujoco.MjModel, cfg: Dict[str, Any]) -> None:
    """Draw friction, link masses, pelvis mass and PD gains into ``model`` (in place)."""
    rng = np.random.default_rng(int(cfg["seed"]))
    foot = {model.geom(g).id for g in C.FOOT_GEOMS}
    floor = model.geom(C.FLOOR_GEOM).id
    friction = rng.uniform(*cfg["friction"])
    for i in range(model.npair):
        g1, g2 = model.pair_geom1[i], model.pair_geom2[i]
        if (g1 in foot and g2 == floor) or (g2 in foot and g1 == floor):
            model.pair_friction[i, 0:2] = friction
    for g in foot:
        model.geom_friction[g, 0] = friction
    scale = rng.uniform(*cfg["link_mass_scale"], size=model.nbody)
    scale[0] = 1.0  # world
    model.body_mass[:] *= scale
    model.body_inertia[:] *= scale[:, None]
    pelvis = model.body(C.ROOT_BODY).id
    old = model.body_mass[pelvis]
    new = max(old + rng.uniform(*cfg["base_mass_offset"]), 0.1 * old)
    model.body_mass[pelvis] = new
    model.body_inertia[pelvis] *= new / old
    kp = rng.uniform(*cfg["pd_gain_scale"], size=model.nu)
    kv = rng.uniform(*cfg["pd_gain_scale"], size=model.nu)
    model.actuator_gainprm[:, 0] *= kp
    model.actuator_biasprm[:, 1] *= kp
    model.actuator_biasprm[:, 2] *= kv
    mujoco.mj_setConst(model, mujoco.MjData(model))


def _check_config(cfg: Dict[str, Any]) -> None:
    def bad(key, expected):
        return ValueError(f"config[{key!r}] must be {expected}, got {cfg[key]!r}")

    if not cfg["action_scale"] > 0:
        raise bad("action_scale", "> 0 (rad)")
    ref_scale = cfg["action_scale_from_reference"]
    if ref_scale is not None and not ref_scale > 0:
        raise bad("action_scale_from_reference", "None or > 0")
    steps = cfg["reference_steps"]
    if not isinstance(steps, (tuple, list)) or not all(isinstance(s, int) and s >= 0 for s in steps):
        raise bad("reference_steps", "a tuple of integers >= 0")
    ep = cfg["episode_length"]
    if ep is not None and (not isinstance(ep, int) or ep < 1):
        raise bad("episode_length", "None or an integer >= 1")
    limit = cfg["max_tracking_error"]
    if limit is not None and not limit > 0:
        raise bad("max_tracking_error", "None or > 0 (m)")
    if not cfg["success_tracking_error"] > 0:
        raise bad("success_tracking_error", "> 0 (m)")
    if not isinstance(cfg["residual_actions"], bool):
        raise bad("residual_actions", "True or False")
    if not isinstance(cfg["random_start"], bool):
        raise bad("random_start", "True or False")
