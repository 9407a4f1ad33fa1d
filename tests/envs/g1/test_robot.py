"""Tests of the G1 MJCF (assets/g1/g1.xml) against Menagerie's published parameters.

Reference numbers below are written out by hand from MuJoCo Menagerie,
google-deepmind/mujoco_menagerie, unitree_g1/g1_mjx.xml (model "g1_29dof_rev_1_0 mjx").
"""

import mujoco
import numpy as np
import pytest

from bcg_envs.envs.g1 import constants as C

MENAGERIE_JOINT_ORDER = [
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
]

# (joint, lower, upper, axis) from Menagerie g1_mjx.xml: default classes hip_pitch, knee,
# ankle_roll, waist_pitch, elbow, wrist_pitch and the per-joint overrides of
# right_hip_roll_joint and right_shoulder_roll_joint.
PUBLISHED_RANGES = [
    ("left_hip_pitch_joint", -2.5307, 2.8798, (0, 1, 0)),
    ("right_hip_roll_joint", -2.9671, 0.5236, (1, 0, 0)),
    ("left_knee_joint", -0.087267, 2.8798, (0, 1, 0)),
    ("right_ankle_roll_joint", -0.2618, 0.2618, (1, 0, 0)),
    ("waist_pitch_joint", -0.52, 0.52, (0, 1, 0)),
    ("right_shoulder_roll_joint", -2.2515, 1.5882, (1, 0, 0)),
    ("left_elbow_joint", -1.0472, 2.0944, (0, 1, 0)),
    ("left_wrist_pitch_joint", -1.61443, 1.61443, (0, 1, 0)),
]

# Sum of the body masses of Menagerie g1_mjx.xml (pelvis 3.813; per leg 1.35 + 1.52 +
# 1.702 + 1.932 + 0.074 + 0.608; waist 0.214 + 0.086 + torso 7.818; per arm 0.718 +
# 0.643 + 0.734 + 0.6 + 0.085445 + 0.48405 + 0.254576).
PUBLISHED_TOTAL_MASS_KG = 33.341142


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_path(str(C.G1_XML))


def _foot_bottoms(model, data):
    ids = [model.geom(g).id for g in C.FOOT_GEOMS]
    return data.geom_xpos[ids, 2] - model.geom_size[ids, 0]


def test_model_loads_with_floating_base_and_29_actuators(model):
    assert model.nu == 29
    assert model.nq == 7 + 29 and model.nv == 6 + 29
    assert model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert model.joint(0).name == "floating_base"
    assert model.body(model.jnt_bodyid[0]).name == "pelvis"


def test_joint_and_actuator_order(model):
    hinge_names = [model.joint(i).name for i in range(1, model.njnt)]
    assert hinge_names == MENAGERIE_JOINT_ORDER
    assert list(C.JOINT_NAMES) == MENAGERIE_JOINT_ORDER
    # qpos addresses are contiguous after the free joint, in the same order.
    adr = [model.jnt_qposadr[model.joint(n).id] for n in C.JOINT_NAMES]
    assert adr == list(range(7, 36))
    act_joints = [model.joint(model.actuator_trnid[i, 0]).name for i in range(model.nu)]
    assert act_joints == MENAGERIE_JOINT_ORDER
    for i in range(model.nu):
        assert model.actuator_biastype[i] == mujoco.mjtBias.mjBIAS_AFFINE  # position servo
        assert model.actuator_gainprm[i, 0] > 0
        assert model.actuator_biasprm[i, 1] == -model.actuator_gainprm[i, 0]


@pytest.mark.parametrize("joint,lower,upper,axis", PUBLISHED_RANGES)
def test_published_joint_ranges_and_axes(model, joint, lower, upper, axis):
    j = model.joint(joint)
    assert j.limited
    np.testing.assert_allclose(j.range, [lower, upper], atol=1e-9)
    np.testing.assert_allclose(model.jnt_axis[j.id], axis, atol=1e-12)
    assert C.JOINT_LIMITS[joint] == pytest.approx((lower, upper))


def test_constants_joint_limits_match_model(model):
    for name in C.JOINT_NAMES:
        np.testing.assert_allclose(model.joint(name).range, C.JOINT_LIMITS[name], atol=1e-9)
        # Position actuators track the joint range (inheritrange).
        act = model.actuator(C.ACTUATOR_NAMES[C.JOINT_NAMES.index(name)])
        np.testing.assert_allclose(act.ctrlrange, C.JOINT_LIMITS[name], atol=1e-9)


def test_torque_limits(model):
    # Menagerie g1_mjx.xml actuatorfrcrange: knee 139, hip pitch 88, ankle 50, wrist pitch 5.
    expected = {
        "left_knee": 139.0,
        "right_hip_pitch": 88.0,
        "left_ankle_pitch": 50.0,
        "right_wrist_pitch": 5.0,
        "waist_yaw": 88.0,
        "left_elbow": 25.0,
    }
    for act, limit in expected.items():
        a = model.actuator(act)
        assert model.actuator_forcelimited[a.id]
        np.testing.assert_allclose(a.forcerange, [-limit, limit])
    for i, name in enumerate(C.JOINT_NAMES):
        limit = C.TORQUE_LIMITS[name]
        np.testing.assert_allclose(model.actuator_forcerange[i], [-limit, limit])


def test_total_and_link_masses(model):
    total = model.body_subtreemass[0]
    assert abs(total - PUBLISHED_TOTAL_MASS_KG) / PUBLISHED_TOTAL_MASS_KG < 0.01
    assert C.PUBLISHED_TOTAL_MASS == pytest.approx(PUBLISHED_TOTAL_MASS_KG)
    # Individual links (Menagerie g1_mjx.xml <inertial mass=...>).
    assert model.body("pelvis").mass[0] == pytest.approx(3.813)
    assert model.body("torso_link").mass[0] == pytest.approx(7.818)
    assert model.body("left_knee_link").mass[0] == pytest.approx(1.932)
    assert model.body("right_wrist_yaw_link").mass[0] == pytest.approx(0.254576)
    np.testing.assert_allclose(model.body("torso_link").inertia, [0.121847, 0.109825, 0.0273735])


def test_options(model):
    assert model.opt.timestep == pytest.approx(0.004)
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    assert model.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    assert 4 <= model.opt.iterations <= 5
    assert model.opt.ls_iterations == 8


def test_only_declared_collision_pairs(model):
    # No geom takes part in automatic (contype/conaffinity) collision detection.
    assert np.all(model.geom_contype == 0) and np.all(model.geom_conaffinity == 0)
    pairs = {
        frozenset((model.geom(model.pair_geom1[i]).name, model.geom(model.pair_geom2[i]).name))
        for i in range(model.npair)
    }
    expected = {frozenset((g, C.FLOOR_GEOM)) for g in C.FOOT_GEOMS}
    expected |= {frozenset(p) for p in C.SELF_COLLISION_PAIRS}
    assert model.npair == len(expected) == 9
    assert pairs == expected
    for g in C.FOOT_GEOMS:
        assert model.geom(g).type[0] == mujoco.mjtGeom.mjGEOM_SPHERE
    # Visual geoms are primitives only.
    assert model.nmesh == 0


def test_sites_and_camera(model):
    for site in (C.IMU_SITE,) + C.KEY_SITES + C.FEET_SITES + C.HAND_SITES:
        model.site(site)  # raises KeyError if missing
    assert model.camera("track").mode[0] == mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM


def test_stand_keyframe_feet_touch_floor(model):
    key = model.key(C.STAND_KEYFRAME)
    np.testing.assert_allclose(key.qpos[7:], C.DEFAULT_POSE)
    np.testing.assert_allclose(key.ctrl, C.DEFAULT_POSE)
    assert key.qpos[2] == pytest.approx(C.DEFAULT_ROOT_HEIGHT)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, key.id)
    mujoco.mj_forward(model, data)
    bottoms = _foot_bottoms(model, data)
    assert np.all(np.abs(bottoms) < 1e-4), bottoms
    # Lowered by 1 mm, the stand pose has exactly the 8 foot-floor contacts.
    data.qpos[2] -= 0.001
    mujoco.mj_forward(model, data)
    names = {(model.geom(c.geom1).name, model.geom(c.geom2).name) for c in data.contact[: data.ncon]}
    assert data.ncon == 8
    assert all(C.FLOOR_GEOM in n for n in names)


def test_stand_pose_holds_under_pd(model):
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key(C.STAND_KEYFRAME).id)
    data.ctrl[:] = C.DEFAULT_POSE
    heights = []
    for _ in range(500):  # 2 s
        mujoco.mj_step(model, data)
        heights.append(data.qpos[2])
    assert np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(data.qvel))
    assert min(heights) > 0.6
    # It actually stands: the pelvis stays near the keyframe height and comes to rest.
    assert min(heights) > C.DEFAULT_ROOT_HEIGHT - 0.03
    assert np.abs(data.qvel).max() < 0.2
    up = np.zeros(9)
    mujoco.mju_quat2Mat(up, data.qpos[3:7])
    assert up[8] > 0.98  # pelvis z axis within ~11 degrees of vertical


def test_mjx_put_model(model):
    from mujoco import mjx

    mx = mjx.put_model(model)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    dx = mjx.put_data(model, data)
    assert mx.nu == 29
    assert dx.qpos.shape == (36,)


@pytest.mark.long  # ~20 s jit compile; integration tier
def test_mjx_step_jit(model):
    import jax
    from mujoco import mjx

    mx = mjx.put_model(model)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    dx = mjx.put_data(model, data)
    step = jax.jit(mjx.step)
    for _ in range(5):
        dx = step(mx, dx)
    qpos = np.asarray(dx.qpos)
    assert np.all(np.isfinite(qpos))
    assert abs(qpos[2] - C.DEFAULT_ROOT_HEIGHT) < 0.01
