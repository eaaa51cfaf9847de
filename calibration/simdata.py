"""Rendered calibration data sets from the ground-truth scene (tests, demos, ``calibrate --sim``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.poses import plan_eye_in_hand, plan_eye_to_hand, plan_intrinsics_views
from calibration.scene import CalibrationScene
from calibration.session import Say, _quiet


@dataclass
class RenderedSet:
    images: list[np.ndarray]
    tcp_in_base: list[np.ndarray]  # empty for intrinsics sets
    truth: np.ndarray  # K (intrinsics) or the true hand-eye transform
    rejected_poses: int = 0
    joints: list[np.ndarray] | None = None  # the pose plan (hand-eye sets)


def distort(image: np.ndarray, camera_matrix: np.ndarray, dist_coeffs: np.ndarray) -> np.ndarray:
    """What a lens with ``dist_coeffs`` would have seen: resample the pinhole render."""
    import cv2

    h, w = image.shape[:2]
    uu, vv = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    pts = np.stack([uu.ravel(), vv.ravel()], axis=1).reshape(-1, 1, 2)
    ideal = cv2.undistortPoints(pts, camera_matrix, dist_coeffs, P=camera_matrix).reshape(h, w, 2)
    return cv2.remap(
        image, ideal[..., 0], ideal[..., 1], interpolation=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )


def intrinsics_set(
    scene: CalibrationScene,
    n_views: int = 20,
    noise_std: float = 2.0,
    seed: int = 0,
    dist_coeffs: np.ndarray | None = None,
    say: Say = _quiet,
) -> RenderedSet:
    k = scene.camera.matrix()
    size = (scene.camera.width, scene.camera.height)
    views = plan_intrinsics_views(scene.board_in_base(), scene.board.corners(), k, size, n_views, seed=seed)
    rng = np.random.default_rng(seed)
    images = []
    for i, cam in enumerate(views):
        scene.place_free_camera(cam)
        img = scene.render("free")
        if dist_coeffs is not None:
            img = distort(img, k, np.asarray(dist_coeffs, dtype=np.float64))
        if noise_std > 0:
            img = np.clip(img + rng.normal(0.0, noise_std, img.shape), 0, 255).astype(np.uint8)
        images.append(img)
        say(f"render [{i + 1}/{len(views)}]")
    return RenderedSet(images, [], k)


def handeye_set(
    scene: CalibrationScene,
    start: np.ndarray,
    n_poses: int | None = None,
    noise_std: float = 2.0,
    seed: int = 0,
    say: Say = _quiet,
) -> RenderedSet:
    """Render the wrist camera (board in the world) or the fixed camera (board on the hand) at a
    safe pose plan; the truth is ``T_tcp_cam`` or ``T_base_cam``."""
    k = scene.camera.matrix()
    size = (scene.camera.width, scene.camera.height)
    if scene.board_on_hand:
        plan = plan_eye_to_hand(
            scene.cam_in_base,
            scene.board_pose,
            scene.board.corners(),
            k,
            size,
            start,
            n_poses=n_poses or 20,
            seed=seed,
        )
        camera, truth = "fixed", scene.cam_in_base
    else:
        plan = plan_eye_in_hand(
            scene.board_in_base(),
            scene.board.corners(),
            scene.cam_in_tcp,
            k,
            size,
            start,
            n_poses=n_poses or 15,
            seed=seed,
        )
        camera, truth = "wrist", scene.cam_in_tcp
    say(f"pose plan: {len(plan)} safe poses ({plan.rejected} candidates rejected)")
    rng = np.random.default_rng(seed)
    images = []
    for i, q in enumerate(plan.joints):
        scene.set_joints(q)
        images.append(scene.render(camera, noise_std=noise_std, rng=rng))
        say(f"render [{i + 1}/{len(plan)}] q={np.round(q, 2).tolist()}")
    return RenderedSet(images, list(plan.tcp), truth, plan.rejected, list(plan.joints))
