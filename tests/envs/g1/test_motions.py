"""Tests of the G1 motion clips (bcg_envs/envs/g1/motions.py, bcg_envs/assets/motions/*.csv)."""

import mujoco
import numpy as np
import pytest

from bcg_envs.envs.g1 import constants as C
from bcg_envs.envs.g1 import motions as M

# Expected clip durations (s): jump ~2, squat ~3, kick ~3.
DURATIONS = {"jump": (1.8, 2.6), "squat": (2.5, 3.5), "kick": (2.5, 3.5)}


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_path(str(C.G1_XML))


@pytest.fixture(scope="module")
def clips():
    return {name: M.load_clip(name) for name in M.CLIP_NAMES}


def _foot_bottoms(model, clip):
    """(T, 8) lowest point of each foot sphere, by MuJoCo forward kinematics."""
    data = mujoco.MjData(model)
    ids = [model.geom(g).id for g in C.FOOT_GEOMS]
    radius = model.geom_size[ids, 0]
    qpos = clip.qpos()
    out = np.empty((clip.num_frames, len(ids)))
    for i in range(clip.num_frames):
        data.qpos[:] = qpos[i]
        mujoco.mj_kinematics(model, data)
        out[i] = data.geom_xpos[ids, 2] - radius
    return out


def test_shipped_files_exist():
    assert sorted(M.CLIP_NAMES) == ["jump", "kick", "squat"]
    for name in M.CLIP_NAMES:
        path = C.MOTIONS_DIR / f"g1_{name}.csv"
        assert path.is_file(), path
        first = path.read_text().splitlines()[0].split(",")
        assert len(first) == 36


@pytest.mark.parametrize("name", M.CLIP_NAMES)
def test_clip_basic_shape_and_start_pose(clips, name):
    clip = clips[name]
    assert clip.fps == 30.0
    lo, hi = DURATIONS[name]
    assert lo <= clip.duration <= hi
    assert clip.joint_pos.shape == (clip.num_frames, 29)
    np.testing.assert_allclose(np.linalg.norm(clip.root_quat_xyzw, axis=1), 1.0, atol=1e-6)
    # Clips start and end in the stand keyframe pose.
    np.testing.assert_allclose(clip.joint_pos[0], C.DEFAULT_POSE, atol=1e-6)
    np.testing.assert_allclose(clip.joint_pos[-1], C.DEFAULT_POSE, atol=1e-6)
    assert clip.root_pos[0, 2] == pytest.approx(C.DEFAULT_ROOT_HEIGHT, abs=1e-4)


@pytest.mark.parametrize("name", M.CLIP_NAMES)
def test_clip_respects_joint_limits(model, clips, name):
    clip = clips[name]
    for j, joint in enumerate(C.JOINT_NAMES):
        lower, upper = model.joint(joint).range
        assert np.all(clip.joint_pos[:, j] >= lower + 0.01), joint
        assert np.all(clip.joint_pos[:, j] <= upper - 0.01), joint


@pytest.mark.parametrize("name", M.CLIP_NAMES)
def test_clip_feet_never_penetrate_and_touch_in_contact(model, clips, name):
    bottoms = _foot_bottoms(model, clips[name])
    assert bottoms.min() >= -0.005
    lowest = bottoms.min(axis=1)
    if name in ("squat", "kick"):
        # Always on the ground: some foot sphere sits on the floor in every frame.
        assert np.all(np.abs(lowest) < 1e-3), np.abs(lowest).max()
    else:
        # Frames are either in ground contact (lowest point at z~0) or airborne.
        grounded = np.abs(lowest) < 1e-3
        assert np.all(grounded | (lowest > 0.0))
    # Matches the module's own FK helper.
    heights = M.foot_heights(clips[name])
    np.testing.assert_allclose(heights[:, 0], bottoms[:, :4].min(axis=1), atol=1e-9)
    np.testing.assert_allclose(heights[:, 1], bottoms[:, 4:].min(axis=1), atol=1e-9)


def test_jump_has_flight_phase(model, clips):
    clip = clips["jump"]
    bottoms = _foot_bottoms(model, clip)
    left, right = bottoms[:, :4].min(axis=1), bottoms[:, 4:].min(axis=1)
    airborne = np.flatnonzero((left > 0.02) & (right > 0.02))
    assert airborne.size >= 3
    # One contiguous flight phase, with ground contact before and after.
    assert np.all(np.diff(airborne) == 1)
    assert airborne[0] > 0 and airborne[-1] < clip.num_frames - 1
    # The root rises 0.15-0.25 m above the standing height.
    rise = clip.root_pos[:, 2].max() - clip.root_pos[0, 2]
    assert 0.15 <= rise <= 0.25
    # ... and falls ballistically in between (constant vertical acceleration -g).
    z = clip.root_pos[airborne, 2]
    acc = np.diff(z, 2) * clip.fps**2
    np.testing.assert_allclose(acc, -M.GRAVITY, atol=0.05)


def test_squat_goes_deep_and_kick_lifts_the_right_foot(model, clips):
    squat = clips["squat"]
    assert squat.root_pos[:, 2].min() < C.DEFAULT_ROOT_HEIGHT - 0.2
    kick = clips["kick"]
    bottoms = _foot_bottoms(model, kick)
    left, right = bottoms[:, :4].min(axis=1), bottoms[:, 4:].min(axis=1)
    assert right.max() > 0.3  # the kicking foot goes up
    assert np.all(np.abs(left) < 1e-3)  # the stance foot stays on the floor


@pytest.mark.parametrize("name", M.CLIP_NAMES)
def test_shipped_csv_matches_generator(clips, name):
    regenerated = M.make_clip(name)
    shipped = clips[name]
    assert regenerated.num_frames == shipped.num_frames
    np.testing.assert_allclose(regenerated.as_array(), shipped.as_array(), atol=1e-6)


def test_csv_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    n = 7
    clip = M.MotionClip(
        fps=50.0,
        root_pos=rng.normal(size=(n, 3)),
        root_quat_xyzw=M.quat_normalize(rng.normal(size=(n, 4))),
        joint_pos=rng.uniform(-1, 1, size=(n, 29)),
    )
    path = M.save_csv(clip, tmp_path / "sub" / "clip.csv")
    loaded = M.load_csv(path, fps=50.0)
    assert loaded.fps == 50.0 and loaded.num_frames == n and loaded.name == "clip"
    np.testing.assert_allclose(loaded.root_pos, clip.root_pos, atol=1e-8)
    np.testing.assert_allclose(loaded.root_quat_xyzw, clip.root_quat_xyzw, atol=1e-8)
    np.testing.assert_allclose(loaded.joint_pos, clip.joint_pos, atol=1e-8)


def _write_rows(path, rows):
    path.write_text("\n".join(",".join(str(v) for v in r) for r in rows) + "\n")


def _good_row():
    return [0.0, 0.0, 0.78, 0.0, 0.0, 0.0, 1.0] + [0.1] * 29


@pytest.mark.parametrize(
    "bad_row,message",
    [
        (_good_row()[:-1], "expected 36"),
        (_good_row() + [0.0], "expected 36"),
        (_good_row()[:10] + ["nan"] + _good_row()[11:], "non-finite"),
        (_good_row()[:10] + ["inf"] + _good_row()[11:], "non-finite"),
        (_good_row()[:10] + ["abc"] + _good_row()[11:], "not a number"),
        ([0.0, 0.0, 0.78, 0.0, 0.0, 0.0, 0.0] + [0.1] * 29, "quaternion"),
    ],
)
def test_loader_errors_name_file_and_line(tmp_path, bad_row, message):
    path = tmp_path / "bad_clip.csv"
    _write_rows(path, [_good_row(), _good_row(), bad_row, _good_row()])
    with pytest.raises(ValueError) as err:
        M.load_csv(path)
    text = str(err.value)
    assert "bad_clip.csv" in text
    assert "line 3" in text
    assert message in text


def test_loader_rejects_empty_file(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("\n")
    with pytest.raises(ValueError, match="empty.csv"):
        M.load_csv(path)


def test_interpolation_and_finite_differences():
    fps = 10.0
    t = np.arange(5) / fps
    yaw = 0.5 * t  # 0.5 rad/s about z
    quat = np.stack([np.zeros(5), np.zeros(5), np.sin(yaw / 2), np.cos(yaw / 2)], axis=1)
    joints = np.outer(t, np.arange(29))  # joint j moves at j rad/s
    root = np.stack([t, 2 * t, np.full(5, 0.7)], axis=1)
    clip = M.MotionClip(fps=fps, root_pos=root, root_quat_xyzw=quat, joint_pos=joints)
    assert clip.duration == pytest.approx(0.4)
    # Linear interpolation between frames 1 and 2.
    np.testing.assert_allclose(clip.joint_pos_at(0.125), 0.125 * np.arange(29))
    np.testing.assert_allclose(clip.root_pos_at(0.125), [0.125, 0.25, 0.7])
    # Slerp: rotation angle interpolates linearly, norm stays 1.
    q = clip.root_quat_at(0.125)
    np.testing.assert_allclose(q, [0, 0, np.sin(0.0625 / 2), np.cos(0.0625 / 2)], atol=1e-12)
    # Clamped outside the clip.
    np.testing.assert_allclose(clip.joint_pos_at(-1.0), joints[0])
    np.testing.assert_allclose(clip.joint_pos_at(10.0), joints[-1])
    # Velocities.
    np.testing.assert_allclose(clip.joint_vel(), np.tile(np.arange(29.0), (5, 1)), atol=1e-9)
    np.testing.assert_allclose(clip.root_lin_vel(), np.tile([1.0, 2.0, 0.0], (5, 1)), atol=1e-9)
    np.testing.assert_allclose(clip.root_ang_vel(), np.tile([0.0, 0.0, 0.5], (5, 1)), atol=1e-9)
    frame = clip.frame(0.2)
    np.testing.assert_allclose(frame.joint_vel, np.arange(29.0), atol=1e-9)
    np.testing.assert_allclose(frame.qpos[3:7], [np.cos(0.05), 0, 0, np.sin(0.05)], atol=1e-12)
    # Resampling keeps the motion.
    fine = clip.resample(50.0)
    assert fine.num_frames == 21
    np.testing.assert_allclose(fine.joint_pos[-1], joints[-1])


def test_slerp_takes_shortest_path():
    q0 = np.array([0.0, 0.0, 0.0, 1.0])
    q1 = -np.array([0.0, 0.0, np.sin(0.25), np.cos(0.25)])  # same rotation as +q, 0.5 rad
    mid = M.quat_slerp(q0, q1, 0.5)
    angle = 2 * np.arccos(min(1.0, abs(mid[3])))
    assert angle == pytest.approx(0.25)


def test_motion_clip_validates_shapes():
    with pytest.raises(ValueError, match="joint_pos"):
        M.MotionClip(30.0, np.zeros((3, 3)), np.tile([0, 0, 0, 1.0], (3, 1)), np.zeros((3, 28)))
    with pytest.raises(ValueError, match="non-finite"):
        M.MotionClip(30.0, np.full((3, 3), np.nan), np.tile([0, 0, 0, 1.0], (3, 1)), np.zeros((3, 29)))
    with pytest.raises(ValueError, match="unknown clip"):
        M.make_clip("backflip")
