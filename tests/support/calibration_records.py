"""Calibration records for tests that need a camera calibration without rendering one."""

from __future__ import annotations

import numpy as np


def camera_records(mode: str, transform: np.ndarray, camera, serial: str = "cam"):
    """A valid hand-eye record (``mode``, camera pose ``transform``) and the intrinsics record it
    names (``camera``: a ``calibration.scene.CameraSpec``, whose matrix and size it carries)."""
    from calibration.store import CalibrationRecord

    intrinsics = CalibrationRecord(
        kind="intrinsics",
        robot_serial="fr3-test",
        camera_serial=serial,
        method="test",
        residuals={"rms_px": 0.1},
        data_hash="0123abcd0123abcd",
        payload={"camera_matrix": camera.matrix().tolist(), "image_size": [camera.width, camera.height]},
    )
    handeye = CalibrationRecord(
        kind="handeye",
        robot_serial="fr3-test",
        camera_serial=serial,
        method="test",
        residuals={"translation_rms_mm": 0.1, "rotation_rms_deg": 0.01},
        data_hash="4567abcd4567abcd",
        payload={"mode": mode, "transform": np.asarray(transform).tolist(), "intrinsics_id": intrinsics.id},
    )
    return handeye, intrinsics
