"""Hand-eye calibration on rendered views at safe robot poses: eye-in-hand and eye-to-hand."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.excitation import DEFAULT_START
from calibration.handeye import calibrate_handeye, transform_error
from calibration.poses import path_is_safe
from calibration.scene import CalibrationScene
from calibration.session import handeye_views, run_handeye
from calibration.simdata import handeye_set
from rlinf_robot.robot.franka.model import forward_kinematics
from rlinf_robot.safety import SafetyLimits

ALL_METHODS = {"tsai", "park", "horaud", "andreff", "daniilidis", "shah", "li"}


def _session(board_on_hand: bool, n_poses: int):
    with CalibrationScene(board_on_hand=board_on_hand) as scene:
        data = handeye_set(scene, DEFAULT_START, n_poses=n_poses, noise_std=3.0, seed=0)
        k = scene.camera.matrix()
        views = handeye_views(data.images, data.tcp_in_base, scene.board, k, np.zeros(5))
    return data, views


@pytest.fixture(scope="module")
def eye_in_hand():
    return _session(False, 12)


@pytest.fixture(scope="module")
def eye_to_hand():
    return _session(True, 20)


@pytest.mark.parametrize("name", ["eye_in_hand", "eye_to_hand"])
def test_handeye_within_2mm_and_0_2deg_with_image_noise(name, request):
    data, views = request.getfixturevalue(name)
    assert len(views.used) >= 10
    result = run_handeye(views, name)
    assert set(result.methods) == ALL_METHODS  # every OpenCV method ran and was scored
    trans_mm, rot_deg = transform_error(result.transform, data.truth)
    assert trans_mm < 2.0 and rot_deg < 0.2, (result.method, trans_mm, rot_deg)
    assert result.translation_rms_mm < 2.0 and result.rotation_rms_deg < 0.2 and result.warnings == []
    for m in result.methods.values():  # the residual is an honest proxy for the error
        assert m.translation_rms_mm > 0 and m.rotation_rms_deg > 0


@pytest.mark.parametrize("name", ["eye_in_hand", "eye_to_hand"])
def test_pose_plan_is_safe_for_the_arm(name, request):
    data, _ = request.getfixturevalue(name)
    limits = SafetyLimits.from_yaml()
    prev = DEFAULT_START
    for q, tcp in zip(data.joints, data.tcp_in_base, strict=True):
        assert np.all(q >= limits.q_lo) and np.all(q <= limits.q_hi)
        assert np.allclose(forward_kinematics(q), tcp)
        assert np.all(tcp[:3, 3] >= limits.workspace_min) and np.all(tcp[:3, 3] <= limits.workspace_max)
        assert path_is_safe(prev, q, limits)  # the straight joint move there keeps the TCP in the box
        prev = q
    rot = [t[:3, :3] for t in data.tcp_in_base]
    spread = max(np.degrees(np.arccos(np.clip((np.trace(a.T @ b) - 1) / 2, -1, 1))) for a in rot for b in rot)
    assert spread > 20  # rotations about several axes: hand-eye is well posed


def test_bad_inputs_are_clear_errors():
    eye = np.eye(4)
    with pytest.raises(ValueError, match="mode"):
        calibrate_handeye([eye] * 4, [eye] * 4, mode="eye_on_head")
    with pytest.raises(ValueError, match="3 robot poses but 4"):
        calibrate_handeye([eye] * 3, [eye] * 4)
    with pytest.raises(ValueError, match="at least 3"):
        calibrate_handeye([eye] * 2, [eye] * 2)
    with pytest.raises(ValueError, match="unknown hand-eye method"):
        calibrate_handeye([eye] * 4, [eye] * 4, methods=["magic"])
