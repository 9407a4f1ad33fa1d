"""Tests of runtime clip loading (bcg_envs/envs/g1/motions.py, assets/motions/*.csv)."""

import numpy as np
import pytest

from bcg_envs.envs.g1 import constants as C
from bcg_envs.envs.g1 import motions as M
from bcg_envs.envs.g1.quaternions import quat_normalize


def test_shipped_files_exist():
    assert sorted(M.CLIP_NAMES) == ["jump", "kick", "squat"]
    for name in M.CLIP_NAMES:
        path = C.MOTIONS_DIR / f"g1_{name}.csv"
        assert path.is_file(), path
        assert M.clip_path(name) == path
        first = path.read_text().splitlines()[0].split(",")
        assert len(first) == M.NUM_COLUMNS == 36


@pytest.mark.parametrize("name", M.CLIP_NAMES)
def test_load_clip_shapes_and_quaternion_order(name):
    clip = M.load_clip(name)
    assert clip.name == name and clip.fps == M.DEFAULT_FPS == 30.0
    assert clip.joint_pos.shape == (clip.num_frames, 29)
    np.testing.assert_allclose(np.linalg.norm(clip.root_quat, axis=1), 1.0, atol=1e-6)
    # The file's first row starts upright with quaternion columns 0, 0, 0, 1 (x, y, z, w);
    # the clip holds it as MuJoCo's (w, x, y, z) = (1, 0, 0, 0), also in qpos.
    first = np.array(C.MOTIONS_DIR.joinpath(f"g1_{name}.csv").read_text().splitlines()[0].split(","), float)
    np.testing.assert_array_equal(first[3:7], [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(clip.root_quat[0], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(clip.qpos()[0, 3:7], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(clip.as_array()[0], first)


def test_csv_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    n = 7
    clip = M.MotionClip(
        fps=50.0,
        root_pos=rng.normal(size=(n, 3)),
        root_quat=quat_normalize(rng.normal(size=(n, 4))),
        joint_pos=rng.uniform(-1, 1, size=(n, 29)),
    )
    path = M.save_csv(clip, tmp_path / "sub" / "clip.csv")
    loaded = M.load_csv(path, fps=50.0)
    assert loaded.fps == 50.0 and loaded.num_frames == n and loaded.name == "clip"
    np.testing.assert_allclose(loaded.root_pos, clip.root_pos, atol=1e-8)
    np.testing.assert_allclose(loaded.root_quat, clip.root_quat, atol=1e-8)
    np.testing.assert_allclose(loaded.joint_pos, clip.joint_pos, atol=1e-8)
    # On disk the quaternion is scalar last.
    row = np.array(path.read_text().splitlines()[0].split(","), float)
    np.testing.assert_allclose(row[3:7], np.roll(clip.root_quat[0], -1), atol=1e-8)


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
    quat = np.stack([np.cos(yaw / 2), np.zeros(5), np.zeros(5), np.sin(yaw / 2)], axis=1)
    joints = np.outer(t, np.arange(29))  # joint j moves at j rad/s
    root = np.stack([t, 2 * t, np.full(5, 0.7)], axis=1)
    clip = M.MotionClip(fps=fps, root_pos=root, root_quat=quat, joint_pos=joints)
    assert clip.duration == pytest.approx(0.4)
    # Linear interpolation between frames 1 and 2.
    np.testing.assert_allclose(clip.joint_pos_at(0.125), 0.125 * np.arange(29))
    np.testing.assert_allclose(clip.root_pos_at(0.125), [0.125, 0.25, 0.7])
    # Slerp: rotation angle interpolates linearly, norm stays 1.
    q = clip.root_quat_at(0.125)
    np.testing.assert_allclose(q, [np.cos(0.0625 / 2), 0, 0, np.sin(0.0625 / 2)], atol=1e-12)
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
    np.testing.assert_allclose(clip.qpos_at(0.2), frame.qpos, atol=1e-12)
    # Resampling keeps the motion.
    fine = clip.resample(50.0)
    assert fine.num_frames == 21
    np.testing.assert_allclose(fine.joint_pos[-1], joints[-1])


def test_motion_clip_validates_shapes():
    identity = np.tile([1.0, 0.0, 0.0, 0.0], (3, 1))
    with pytest.raises(ValueError, match="joint_pos"):
        M.MotionClip(30.0, np.zeros((3, 3)), identity, np.zeros((3, 28)))
    with pytest.raises(ValueError, match="non-finite"):
        M.MotionClip(30.0, np.full((3, 3), np.nan), identity, np.zeros((3, 29)))
    with pytest.raises(ValueError, match="zero quaternion"):
        M.MotionClip(30.0, np.zeros((3, 3)), np.zeros((3, 4)), np.zeros((3, 29)))
