"""Camera intrinsics from rendered ChArUco views with pixel noise (and lens distortion)."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.charuco import BoardSpec, CharucoFinder, Detection
from calibration.intrinsics import board_pose, calibrate_intrinsics, coverage
from calibration.scene import CalibrationScene, look_at
from calibration.session import run_intrinsics
from calibration.simdata import intrinsics_set


@pytest.fixture(scope="module")
def scene():
    with CalibrationScene() as s:
        yield s


@pytest.fixture(scope="module")
def noisy_views(scene):
    data = intrinsics_set(scene, n_views=16, noise_std=3.0, seed=1)
    result, detections = run_intrinsics(data.images, scene.board)
    return data, result, detections


def test_board_is_detected_where_the_scene_put_it(scene):
    """PnP on a rendered view recovers the board pose the scene was built with (< 1 mm, < 0.1 deg)."""
    cam = look_at((0.45, -0.12, 0.42), (0.55, 0.0, 0.0))
    scene.place_free_camera(cam)
    det = CharucoFinder(scene.board).detect(scene.render("free"))
    assert det is not None and len(det) == scene.board.n_corners
    t, err = board_pose(det, scene.camera.matrix(), np.zeros(5))
    truth = np.linalg.inv(cam) @ scene.board_in_base()
    assert err < 0.2
    assert np.linalg.norm(t[:3, 3] - truth[:3, 3]) < 1e-3
    assert np.degrees(np.arccos(np.clip((np.trace(truth[:3, :3].T @ t[:3, :3]) - 1) / 2, -1, 1))) < 0.1


def test_focal_length_within_one_percent_with_image_noise(scene, noisy_views):
    data, result, _ = noisy_views
    k = data.truth
    assert abs(result.fx / k[0, 0] - 1) < 0.01 and abs(result.fy / k[1, 1] - 1) < 0.01
    assert abs(result.camera_matrix[0, 2] - k[0, 2]) < 3 and abs(result.camera_matrix[1, 2] - k[1, 2]) < 3
    assert result.rms < 0.5
    assert len(result.per_view_error) == len(result.used_views) >= 12
    assert result.coverage > 0.5 and result.warnings == []


def test_lens_distortion_is_recovered(scene):
    dist = np.array([-0.12, 0.04, 0.0, 0.0, 0.0])
    data = intrinsics_set(scene, n_views=14, noise_std=2.0, seed=2, dist_coeffs=dist)
    result, _ = run_intrinsics(data.images, scene.board)
    assert abs(result.fx / data.truth[0, 0] - 1) < 0.01
    assert abs(result.dist_coeffs[0] - dist[0]) < 0.02


def test_a_corrupted_view_is_rejected_and_does_not_move_the_focal_length(noisy_views):
    data, clean, detections = noisy_views
    rng = np.random.default_rng(0)
    bad = detections[3]
    shaken = Detection(
        bad.ids, bad.image_points + rng.normal(0, 4.0, bad.image_points.shape), bad.object_points
    )
    dets = list(detections)
    dets[3] = shaken
    result = calibrate_intrinsics(dets, clean.image_size)
    assert 3 not in result.used_views
    assert any(v == 3 and "outlier" in why for v, why in result.rejected)
    assert abs(result.fx / data.truth[0, 0] - 1) < 0.01


def test_views_bunched_in_the_centre_raise_a_coverage_warning(noisy_views):
    _, clean, detections = noisy_views
    w, h = clean.image_size
    frac, missing = coverage([np.array([[w / 2, h / 2], [w / 2 + 30, h / 2 + 20]])], (w, h))
    assert frac < 0.1 and set(missing) == {"top", "bottom", "left", "right"}
    centred = []
    for det in detections:
        if det is None:
            continue
        p = det.image_points
        centred.append(Detection(det.ids, (p - p.mean(0)) * 0.3 + [w / 2, h / 2], det.object_points))
    result = calibrate_intrinsics(centred, (w, h))
    assert any("cover" in msg for msg in result.warnings)


def test_too_few_usable_views_is_a_clear_error():
    with pytest.raises(ValueError, match="at least 6 usable views"):
        calibrate_intrinsics([None] * 8, (640, 480))


def test_board_spec_is_validated():
    from rlinf_robot.errors import ConfigError

    with pytest.raises(ConfigError):
        BoardSpec(marker_length=0.05, square_length=0.04)
    with pytest.raises(ConfigError, match="dictionary"):
        BoardSpec(dictionary="DICT_NOPE").board()
