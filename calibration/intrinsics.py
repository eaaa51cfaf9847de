"""Camera intrinsics from ChArUco views: ``cv2.calibrateCamera`` plus what makes it trustworthy.

1. Per-view reprojection error (RMS px of each view's corners under the final model).
2. Outlier rejection: a view whose error exceeds ``outlier_factor`` x the median (and an absolute
   floor) is dropped and the calibration redone - a blurred or mis-detected view otherwise drags
   the focal length with it.
3. Coverage: the image is cut into a grid; the fraction of cells that hold at least one used
   corner is reported, and a warning names the image borders no view reached (distortion is
   largest there and an uncovered border is extrapolated, not measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from calibration.charuco import Detection, _cv2


@dataclass
class IntrinsicsResult:
    camera_matrix: np.ndarray
    dist_coeffs: np.ndarray
    image_size: tuple[int, int]  # (width, height)
    rms: float
    per_view_error: np.ndarray  # px, one per used view
    used_views: list[int]
    rejected: list[tuple[int, str]]
    coverage: float
    warnings: list[str] = field(default_factory=list)
    rvecs: list[np.ndarray] = field(default_factory=list, repr=False)
    tvecs: list[np.ndarray] = field(default_factory=list, repr=False)

    @property
    def fx(self) -> float:
        return float(self.camera_matrix[0, 0])

    @property
    def fy(self) -> float:
        return float(self.camera_matrix[1, 1])

    def to_dict(self) -> dict:
        return {
            "camera_matrix": self.camera_matrix.tolist(),
            "dist_coeffs": self.dist_coeffs.ravel().tolist(),
            "image_size": list(self.image_size),
            "rms_px": self.rms,
            "per_view_error_px": self.per_view_error.tolist(),
            "used_views": self.used_views,
            "rejected": [{"view": i, "reason": r} for i, r in self.rejected],
            "coverage": self.coverage,
            "warnings": self.warnings,
        }


def _view_errors(cv2, obj, img, rvecs, tvecs, k, dist) -> np.ndarray:
    out = []
    for o, p, r, t in zip(obj, img, rvecs, tvecs, strict=True):
        proj, _ = cv2.projectPoints(o, r, t, k, dist)
        out.append(float(np.sqrt(np.mean(np.sum((proj.reshape(-1, 2) - p.reshape(-1, 2)) ** 2, axis=1)))))
    return np.array(out)


def _degenerate(det: Detection) -> bool:
    """Corners on (nearly) one line carry no homography: OpenCV would fail or mislead on them."""
    pts = det.object_points[:, :2] - det.object_points[:, :2].mean(axis=0)
    s = np.linalg.svd(pts, compute_uv=False)
    return len(det) < 6 or s[-1] < 1e-3 * s[0]


def coverage(points: Sequence[np.ndarray], image_size: tuple[int, int], grid: tuple[int, int] = (8, 6)):
    """(fraction of grid cells hit, list of uncovered borders) for image points [N, 2] per view."""
    w, h = image_size
    hit = np.zeros(grid[::-1], dtype=bool)
    allp = np.concatenate([np.asarray(p).reshape(-1, 2) for p in points]) if points else np.zeros((0, 2))
    if len(allp):
        cx = np.clip((allp[:, 0] / w * grid[0]).astype(int), 0, grid[0] - 1)
        cy = np.clip((allp[:, 1] / h * grid[1]).astype(int), 0, grid[1] - 1)
        hit[cy, cx] = True
    missing = [
        name
        for name, cells in (("top", hit[0]), ("bottom", hit[-1]), ("left", hit[:, 0]), ("right", hit[:, -1]))
        if not cells.any()
    ]
    return float(hit.mean()), missing


def calibrate_intrinsics(
    detections: Sequence[Detection | None],
    image_size: tuple[int, int],
    min_views: int = 6,
    outlier_factor: float = 3.0,
    outlier_floor_px: float = 0.5,
    max_rounds: int = 3,
    min_coverage: float = 0.5,
    flags: int = 0,
) -> IntrinsicsResult:
    """Calibrate from per-image detections (None where the board was not found)."""
    cv2 = _cv2()
    rejected: list[tuple[int, str]] = []
    views: list[int] = []
    for i, det in enumerate(detections):
        if det is None:
            rejected.append((i, "board not found"))
        elif _degenerate(det):
            rejected.append((i, f"degenerate view ({len(det)} corners, nearly collinear)"))
        else:
            views.append(i)
    for _ in range(max_rounds + 1):
        if len(views) < min_views:
            raise ValueError(
                f"intrinsics need at least {min_views} usable views, have {len(views)} "
                f"({len(rejected)} rejected: {sorted({r for _, r in rejected})})"
            )
        obj = [detections[i].object_points.astype(np.float32) for i in views]
        img = [detections[i].image_points.astype(np.float32) for i in views]
        rms, k, dist, rvecs, tvecs = cv2.calibrateCamera(obj, img, tuple(image_size), None, None, flags=flags)
        errors = _view_errors(cv2, obj, img, rvecs, tvecs, k, dist)
        limit = max(outlier_factor * float(np.median(errors)), outlier_floor_px)
        bad = [v for v, e in zip(views, errors, strict=True) if e > limit]
        if not bad or len(views) - len(bad) < min_views:
            break
        for v, e in zip(views, errors, strict=True):
            if e > limit:
                rejected.append((v, f"outlier: {e:.2f} px > {limit:.2f} px"))
        views = [v for v in views if v not in bad]
    frac, missing = coverage([detections[i].image_points for i in views], image_size)
    warnings = []
    if frac < min_coverage:
        warnings.append(
            f"views cover {frac:.0%} of the image (want >= {min_coverage:.0%}); add views near the edges"
        )
    if missing:
        warnings.append(
            f"no corners near the {', '.join(missing)} border(s): distortion there is extrapolated"
        )
    return IntrinsicsResult(
        camera_matrix=np.asarray(k, dtype=np.float64),
        dist_coeffs=np.asarray(dist, dtype=np.float64).ravel(),
        image_size=(int(image_size[0]), int(image_size[1])),
        rms=float(rms),
        per_view_error=errors,
        used_views=views,
        rejected=sorted(rejected),
        coverage=frac,
        warnings=warnings,
        rvecs=[np.asarray(r).reshape(3) for r in rvecs],
        tvecs=[np.asarray(t).reshape(3) for t in tvecs],
    )


def board_pose(
    det: Detection, camera_matrix: np.ndarray, dist_coeffs: np.ndarray
) -> tuple[np.ndarray, float]:
    """Board-to-camera transform (4x4) from one detection by PnP, and its reprojection RMS (px)."""
    cv2 = _cv2()
    obj = det.object_points.astype(np.float64)
    img = det.image_points.astype(np.float64)
    ok, rvec, tvec = cv2.solvePnP(obj, img, camera_matrix, dist_coeffs, flags=cv2.SOLVEPNP_ITERATIVE)
    if not ok:
        raise ValueError("solvePnP failed on this view")
    rvec, tvec = cv2.solvePnPRefineLM(obj, img, camera_matrix, dist_coeffs, rvec, tvec)
    proj, _ = cv2.projectPoints(obj, rvec, tvec, camera_matrix, dist_coeffs)
    err = float(np.sqrt(np.mean(np.sum((proj.reshape(-1, 2) - img) ** 2, axis=1))))
    t = np.eye(4)
    t[:3, :3] = cv2.Rodrigues(rvec)[0]
    t[:3, 3] = tvec.ravel()
    return t, err
