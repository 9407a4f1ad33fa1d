"""Tests of the offline clip synthesis (bcg_envs/envs/g1/clip_synthesis.py) and of the
properties it guarantees for the shipped clips (assets/motions/*.csv)."""

import mujoco
import numpy as np
import pytest

from bcg_envs.envs.g1 import clip_synthesis as S
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


@pytest.mark.parametrize("name", M.CLIP_NAMES)
def test_clip_duration_and_start_pose(clips, name):
    clip = clips[name]
    lo, hi = DURATIONS[name]
    assert lo <= clip.duration <= hi
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
    # Matches the synthesis' own FK helper.
    heights = S.foot_heights(clips[name])
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
    np.testing.assert_allclose(acc, -S.GRAVITY, atol=0.05)


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
    regenerated = S.make_clip(name)
    shipped = clips[name]
    assert regenerated.num_frames == shipped.num_frames
    np.testing.assert_allclose(regenerated.as_array(), shipped.as_array(), atol=1e-6)
    # Root orientations are pure pitch, (w, x, y, z) = (cos, 0, sin, 0) of half the angle.
    np.testing.assert_array_equal(regenerated.root_quat[:, [1, 3]], 0.0)
    assert np.all(regenerated.root_quat[:, 0] > 0.9)


def test_main_writes_every_clip(tmp_path, capsys):
    assert S.main([str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"g1_{n}.csv" for n in M.CLIP_NAMES)
    for name in M.CLIP_NAMES:
        written = M.load_csv(M.clip_path(name, tmp_path))
        np.testing.assert_allclose(written.as_array(), M.load_clip(name).as_array(), atol=1e-6)
    assert capsys.readouterr().out.count("wrote ") == len(M.CLIP_NAMES)


def test_make_clip_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown clip"):
        S.make_clip("backflip")
