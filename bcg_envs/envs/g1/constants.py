"""Constants of the Unitree G1 model in ``assets/g1/g1.xml``.

Published numbers (joint names/order, ranges, masses) come from MuJoCo Menagerie,
google-deepmind/mujoco_menagerie, ``unitree_g1/g1_mjx.xml`` (model
"g1_29dof_rev_1_0 mjx", stored version at commit
cc0a8294f4d8f8b085c3ce437cb00a4edd9534ba); see the header of ``g1.xml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

import numpy as np

from bcg_envs.envs.resources import ASSETS

G1_DIR: Path = ASSETS / "g1"
G1_XML: Path = G1_DIR / "g1.xml"
MOTIONS_DIR: Path = ASSETS / "motions"

# Physics / control rates (g1.xml: timestep 0.004 s; the env runs 5 substeps per action).
SIM_DT: float = 0.004
N_SUBSTEPS: int = 5
CTRL_DT: float = SIM_DT * N_SUBSTEPS  # 0.02 s, 50 Hz

ROOT_BODY: str = "pelvis"
FREE_JOINT: str = "floating_base"
STAND_KEYFRAME: str = "stand"

# 29 actuated joints, in Menagerie order: left leg 6, right leg 6, waist 3,
# left arm 7, right arm 7. Actuators in g1.xml follow the same order.
JOINT_NAMES: Tuple[str, ...] = (
    "left_hip_pitch_joint",
    "left_hip_roll_joint",
    "left_hip_yaw_joint",
    "left_knee_joint",
    "left_ankle_pitch_joint",
    "left_ankle_roll_joint",
    "right_hip_pitch_joint",
    "right_hip_roll_joint",
    "right_hip_yaw_joint",
    "right_knee_joint",
    "right_ankle_pitch_joint",
    "right_ankle_roll_joint",
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    "left_shoulder_pitch_joint",
    "left_shoulder_roll_joint",
    "left_shoulder_yaw_joint",
    "left_elbow_joint",
    "left_wrist_roll_joint",
    "left_wrist_pitch_joint",
    "left_wrist_yaw_joint",
    "right_shoulder_pitch_joint",
    "right_shoulder_roll_joint",
    "right_shoulder_yaw_joint",
    "right_elbow_joint",
    "right_wrist_roll_joint",
    "right_wrist_pitch_joint",
    "right_wrist_yaw_joint",
)
NUM_JOINTS: int = len(JOINT_NAMES)
ACTUATOR_NAMES: Tuple[str, ...] = tuple(n[: -len("_joint")] for n in JOINT_NAMES)

# Joint ranges (rad), Menagerie unitree_g1/g1_mjx.xml (default classes and per-joint
# overrides for hip roll and shoulder roll).
JOINT_LIMITS: Dict[str, Tuple[float, float]] = {
    "left_hip_pitch_joint": (-2.5307, 2.8798),
    "left_hip_roll_joint": (-0.5236, 2.9671),
    "left_hip_yaw_joint": (-2.7576, 2.7576),
    "left_knee_joint": (-0.087267, 2.8798),
    "left_ankle_pitch_joint": (-0.87267, 0.5236),
    "left_ankle_roll_joint": (-0.2618, 0.2618),
    "right_hip_pitch_joint": (-2.5307, 2.8798),
    "right_hip_roll_joint": (-2.9671, 0.5236),
    "right_hip_yaw_joint": (-2.7576, 2.7576),
    "right_knee_joint": (-0.087267, 2.8798),
    "right_ankle_pitch_joint": (-0.87267, 0.5236),
    "right_ankle_roll_joint": (-0.2618, 0.2618),
    "waist_yaw_joint": (-2.618, 2.618),
    "waist_roll_joint": (-0.52, 0.52),
    "waist_pitch_joint": (-0.52, 0.52),
    "left_shoulder_pitch_joint": (-3.0892, 2.6704),
    "left_shoulder_roll_joint": (-1.5882, 2.2515),
    "left_shoulder_yaw_joint": (-2.618, 2.618),
    "left_elbow_joint": (-1.0472, 2.0944),
    "left_wrist_roll_joint": (-1.97222, 1.97222),
    "left_wrist_pitch_joint": (-1.61443, 1.61443),
    "left_wrist_yaw_joint": (-1.61443, 1.61443),
    "right_shoulder_pitch_joint": (-3.0892, 2.6704),
    "right_shoulder_roll_joint": (-2.2515, 1.5882),
    "right_shoulder_yaw_joint": (-2.618, 2.618),
    "right_elbow_joint": (-1.0472, 2.0944),
    "right_wrist_roll_joint": (-1.97222, 1.97222),
    "right_wrist_pitch_joint": (-1.61443, 1.61443),
    "right_wrist_yaw_joint": (-1.61443, 1.61443),
}
JOINT_LOWER: np.ndarray = np.array([JOINT_LIMITS[n][0] for n in JOINT_NAMES])
JOINT_UPPER: np.ndarray = np.array([JOINT_LIMITS[n][1] for n in JOINT_NAMES])

# Joint torque limits (Nm), Menagerie g1_mjx.xml `actuatorfrcrange` (symmetric).
_TORQUE_BY_KIND = {
    "hip_pitch": 88.0,
    "hip_roll": 139.0,
    "hip_yaw": 88.0,
    "knee": 139.0,
    "ankle_pitch": 50.0,
    "ankle_roll": 50.0,
    "waist_yaw": 88.0,
    "waist_roll": 50.0,
    "waist_pitch": 50.0,
    "shoulder_pitch": 25.0,
    "shoulder_roll": 25.0,
    "shoulder_yaw": 25.0,
    "elbow": 25.0,
    "wrist_roll": 25.0,
    "wrist_pitch": 5.0,
    "wrist_yaw": 5.0,
}


def _kind(joint: str) -> str:
    name = joint[: -len("_joint")]
    for side in ("left_", "right_"):
        if name.startswith(side):
            name = name[len(side) :]
    return name


TORQUE_LIMITS: Dict[str, float] = {n: _TORQUE_BY_KIND[_kind(n)] for n in JOINT_NAMES}

# Sum of the 30 body masses in Menagerie g1_mjx.xml (pelvis 3.813, each leg 7.186,
# waist+torso 8.118, each arm 3.519071) = 33.341142 kg.
PUBLISHED_TOTAL_MASS: float = 33.341142

# Stand keyframe joint angles (= Menagerie scene_mjx.xml keyframe "home" joint angles).
DEFAULT_POSE: np.ndarray = np.array(
    [
        -0.1,
        0.0,
        0.0,
        0.3,
        -0.2,
        0.0,  # left leg
        -0.1,
        0.0,
        0.0,
        0.3,
        -0.2,
        0.0,  # right leg
        0.0,
        0.0,
        0.0,  # waist yaw, roll, pitch
        0.2,
        0.2,
        0.0,
        1.28,
        0.0,
        0.0,
        0.0,  # left arm
        0.2,
        -0.2,
        0.0,
        1.28,
        0.0,
        0.0,
        0.0,  # right arm
    ]
)
# Pelvis height of the stand keyframe: foot spheres touch z=0 (forward kinematics).
DEFAULT_ROOT_HEIGHT: float = 0.784203

# Contact geometry: four spheres per foot (radius FOOT_SPHERE_RADIUS) colliding with FLOOR_GEOM.
FLOOR_GEOM: str = "floor"
LEFT_FOOT_GEOMS: Tuple[str, ...] = tuple(f"left_foot{i}" for i in range(1, 5))
RIGHT_FOOT_GEOMS: Tuple[str, ...] = tuple(f"right_foot{i}" for i in range(1, 5))
FOOT_GEOMS: Tuple[str, ...] = LEFT_FOOT_GEOMS + RIGHT_FOOT_GEOMS
FOOT_SPHERE_RADIUS: float = 0.005
# Self-collision pair declared in g1.xml besides foot-floor.
SELF_COLLISION_PAIRS: Tuple[Tuple[str, str], ...] = (("left_shin", "right_shin"),)

# Sites.
IMU_SITE: str = "imu"
FEET_SITES: Tuple[str, ...] = ("left_foot", "right_foot")
HAND_SITES: Tuple[str, ...] = ("left_hand", "right_hand")
TORSO_SITE: str = "torso"
KEY_SITES: Tuple[str, ...] = ("torso", "left_hand", "right_hand", "left_foot", "right_foot")
FOOT_BODIES: Tuple[str, ...] = ("left_ankle_roll_link", "right_ankle_roll_link")

# Index helpers into the 29-vector.
LEFT_LEG = slice(0, 6)
RIGHT_LEG = slice(6, 12)
WAIST = slice(12, 15)
LEFT_ARM = slice(15, 22)
RIGHT_ARM = slice(22, 29)
