"""Calibration sessions: images (rendered or real) in, results and store records out.

The same functions run on real images and on the ground-truth scene; only where the images come
from differs. ``progress`` is a callable taking one line of text (the CLI prints it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from calibration.charuco import BoardSpec, CharucoFinder, Detection
from calibration.handeye import HandEyeResult, calibrate_handeye
from calibration.intrinsics import IntrinsicsResult, board_pose, calibrate_intrinsics
from calibration.store import CalibrationRecord

Say = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


def images_hash(images: Sequence[np.ndarray], extra: Sequence[np.ndarray] = ()) -> str:
    h = hashlib.sha256()
    for a in list(images) + list(extra):
        arr = np.ascontiguousarray(a)
        h.update(str(arr.shape).encode())
        h.update(arr.tobytes())
    return h.hexdigest()[:16]


def detect_all(images: Sequence[np.ndarray], board: BoardSpec, say: Say = _quiet) -> list[Detection | None]:
    finder = CharucoFinder(board)
    out = []
    for i, img in enumerate(images):
        det = finder.detect(img)
        out.append(det)
        say(f"[{i + 1}/{len(images)}] {'no board' if det is None else f'{len(det)} corners'}")
    return out


def run_intrinsics(images: Sequence[np.ndarray], board: BoardSpec, say: Say = _quiet, **kwargs):
    """(result, detections) for a list of images of the board."""
    if not images:
        raise ValueError("no images")
    h, w = np.asarray(images[0]).shape[:2]
    detections = detect_all(images, board, say)
    result = calibrate_intrinsics(detections, (w, h), **kwargs)
    say(
        f"intrinsics: fx={result.fx:.2f} fy={result.fy:.2f} RMS {result.rms:.3f} px, "
        f"{len(result.used_views)} views, coverage {result.coverage:.0%}"
    )
    for warning in result.warnings:
        say(f"WARNING: {warning}")
    return result, detections


@dataclass
class HandEyeViews:
    tcp_in_base: list[np.ndarray] = field(default_factory=list)
    board_in_cam: list[np.ndarray] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)


def handeye_views(
    images: Sequence[np.ndarray],
    tcp_in_base: Sequence[np.ndarray],
    board: BoardSpec,
    camera_matrix: np.ndarray,
    dist_coeffs: np.ndarray,
    max_pnp_px: float = 1.0,
    say: Say = _quiet,
) -> HandEyeViews:
    """Board pose per image by PnP; views without the board or with a poor PnP fit are dropped."""
    views = HandEyeViews()
    for i, det in enumerate(detect_all(images, board)):
        if det is None:
            views.rejected.append((i, "board not found"))
            continue
        t, err = board_pose(det, camera_matrix, dist_coeffs)
        if err > max_pnp_px:
            views.rejected.append((i, f"PnP reprojection {err:.2f} px > {max_pnp_px} px"))
            continue
        views.tcp_in_base.append(np.asarray(tcp_in_base[i], dtype=np.float64))
        views.board_in_cam.append(t)
        views.used.append(i)
        say(f"[{i + 1}/{len(images)}] board at {np.round(t[:3, 3], 3).tolist()} m, PnP {err:.3f} px")
    return views


def run_handeye(views: HandEyeViews, mode: str, say: Say = _quiet) -> HandEyeResult:
    result = calibrate_handeye(views.tcp_in_base, views.board_in_cam, mode=mode)
    for name, m in result.methods.items():
        say(f"  {name:<10} residual {m.translation_rms_mm:7.3f} mm {m.rotation_rms_deg:7.4f} deg")
    say(
        f"hand-eye ({mode}): best {result.method}, residual {result.translation_rms_mm:.3f} mm / "
        f"{result.rotation_rms_deg:.4f} deg from {result.n_views} views"
    )
    for warning in result.warnings:
        say(f"WARNING: {warning}")
    return result


# ------------------------------------------------------------------ records
def intrinsics_record(
    result: IntrinsicsResult,
    data_hash: str,
    board: BoardSpec,
    camera_serial: str,
    robot_serial: str = "",
    notes: str = "",
) -> CalibrationRecord:
    return CalibrationRecord(
        kind="intrinsics",
        robot_serial=robot_serial,
        camera_serial=camera_serial,
        method="opencv-calibrateCamera",
        residuals={
            "rms_px": result.rms,
            "max_view_px": float(result.per_view_error.max()),
            "coverage": result.coverage,
        },
        data_hash=data_hash,
        payload={**result.to_dict(), "board": board.to_dict()},
        notes=notes,
    )


def handeye_record(
    result: HandEyeResult,
    data_hash: str,
    camera_serial: str,
    robot_serial: str,
    intrinsics_id: str = "",
    notes: str = "",
) -> CalibrationRecord:
    return CalibrationRecord(
        kind="handeye",
        robot_serial=robot_serial,
        camera_serial=camera_serial,
        method=f"opencv-{result.method}",
        residuals={
            "translation_rms_mm": result.translation_rms_mm,
            "rotation_rms_deg": result.rotation_rms_deg,
        },
        data_hash=data_hash,
        payload={**result.to_dict(), "intrinsics_id": intrinsics_id},
        notes=notes,
    )


def sysid_record(result, robot_serial: str, notes: str = "") -> CalibrationRecord:
    """The fit, stored; ``payload['dynamics_fit']`` is ``DynamicsFit.to_dict()`` for the sim."""
    rec = CalibrationRecord(
        kind="sysid",
        robot_serial=robot_serial,
        camera_serial="",
        method="least-squares-replay",
        residuals={
            "residual_rms_rad": result.residual_after,
            "residual_rms_before_rad": result.residual_before,
        },
        data_hash=result.data_hash,
        payload=result.summary(),
        notes=notes,
    )
    fit = {
        "mean": {k: np.asarray(getattr(result.params, k)).tolist() for k in result.fitted_keys},
        "std": {k: np.asarray(result.std[k]).tolist() for k in result.fitted_keys},
        "fit_id": rec.id,
        "residual_rms": result.residual_after,
    }
    rec.payload["dynamics_fit"] = fit
    return rec


def dynamics_fit_from_record(record: CalibrationRecord):
    """The ``sim.randomization.DynamicsFit`` a stored sysid record describes (train names it by id)."""
    from sim.randomization import DynamicsFit

    if record.kind != "sysid":
        raise ValueError(f"{record.id} is a {record.kind} record, not sysid")
    return DynamicsFit.from_dict(record.payload["dynamics_fit"])


#: The training sim's camera a hand-eye mode places: eye-in-hand is the wrist camera, eye-to-hand
#: the fixed front camera (``sim.mujoco.scene.CAMERA_FRAMES``).
HANDEYE_CAMERA = {"eye_in_hand": "wrist", "eye_to_hand": "front"}


def camera_poses_from_records(
    handeye: CalibrationRecord, intrinsics: CalibrationRecord | None = None
) -> dict:
    """``MujocoConfig.camera_poses`` from a hand-eye record (the camera's pose) and, when given, the
    intrinsics record it used (the vertical field of view ``2 atan(h / 2 f_y)``; MuJoCo cameras have
    no principal-point offset or distortion, which the sim therefore leaves out)."""
    payload = handeye.payload
    camera = HANDEYE_CAMERA[payload["mode"]]
    placed: dict = {"pose": payload["transform"]}
    if intrinsics is not None:
        k = np.asarray(intrinsics.payload["camera_matrix"], dtype=np.float64)
        height = float(intrinsics.payload["image_size"][1])
        placed["fovy"] = float(np.degrees(2.0 * np.arctan(height / (2.0 * k[1, 1]))))
    return {camera: placed}
