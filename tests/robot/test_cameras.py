"""Cameras: the MuJoCo view of the FR3 follows the joint positions; OpenCV reads a (video) device."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.cameras import make_camera
from rlinf_robot.robot.franka.model import HOME_Q as HOME


def test_sim_camera_renders_the_arm_where_the_joints_say():
    with make_camera("sim", width=64, height=48) as cam:
        home = cam.read(HOME).astype(np.int16)
        again = cam.read(HOME).astype(np.int16)
        turned = cam.read(HOME + np.array([0.6, 0, 0, 0, 0, 0, 0])).astype(np.int16)
    assert home.shape == (48, 64, 3)
    assert np.array_equal(home, again)  # deterministic for the same joints
    assert np.mean(np.any(np.abs(turned - home) > 30, axis=-1)) > 0.01  # the arm moved in the image
    assert home.std() > 5  # not a blank frame


def test_opencv_camera_reads_a_video_file(tmp_path):
    cv2 = pytest.importorskip("cv2")
    path = str(tmp_path / "clip.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 10, (32, 24))
    for i in range(3):
        frame = np.zeros((24, 32, 3), np.uint8)
        frame[:, :, 2] = 200  # BGR: red
        frame[:, : 10 * (i + 1), 1] = 100
        writer.write(frame)
    writer.release()
    with make_camera("opencv", device=path) as cam:
        frames = [cam.read() for _ in range(5)]  # rewinds at the end of the file
    assert frames[0].shape == (24, 32, 3)
    assert frames[0][..., 0].mean() > 150 and frames[0][..., 2].mean() < 50  # RGB out: red first
    with pytest.raises(OSError):
        make_camera("opencv", device=str(tmp_path / "missing.avi")).open()


def test_unknown_camera_mode():
    with pytest.raises(ConfigError, match="known"):
        make_camera("kinect")
