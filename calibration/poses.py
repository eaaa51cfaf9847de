"""Robot pose plans for hand-eye calibration that the arm can execute safely.

A plan is a list of joint configurations. Each one is found by inverse kinematics for a camera (or
board) pose chosen to see the board from a new direction - hand-eye needs rotations about
several non-parallel axes, or the problem is degenerate - and kept only if:

* it is inside the joint range with the safety margin, and its TCP inside the workspace box;
* the whole board projects into the image, away from the border (using the nominal intrinsics);
* the straight joint-space move from the previous pose keeps the TCP inside the box all the way.

The same plan drives the simulated scene in the tests and the arm in a real session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from calibration.scene import look_at, rot
from rlinf_robot.robot.franka.model import forward_kinematics, solve_ik, tcp_position
from rlinf_robot.safety import SafetyLimits


def joints_for(target: np.ndarray, seed: np.ndarray, limits: SafetyLimits) -> np.ndarray | None:
    """Joints near ``seed`` putting the TCP at ``target`` (4x4) inside the safe joint range, or None.

    The FR3 model's solver, set up for far targets: each iteration moves a joint at most 0.2 rad
    and the damping is higher (0.01), so a viewpoint a few decimetres away is approached along one
    IK branch instead of jumping across the workspace.
    """
    r = solve_ik(
        target, seed, limits.tcp_offset, limits.q_lo, limits.q_hi, damping=1e-2, max_iter=200, max_step=0.2
    )
    return r.q if r.converged else None


@dataclass(frozen=True)
class PosePlan:
    joints: list[np.ndarray]
    tcp: list[np.ndarray]  # T_base_tcp of each pose
    rejected: int  # candidate poses that failed a check

    def __len__(self) -> int:
        return len(self.joints)


def _projects_inside(points_cam: np.ndarray, k: np.ndarray, size: tuple[int, int], margin: float) -> bool:
    if np.any(points_cam[:, 2] < 0.05):
        return False
    uv = (k @ (points_cam.T / points_cam[:, 2])).T[:, :2]
    w, h = size
    return bool(
        np.all(
            (uv[:, 0] > margin * w)
            & (uv[:, 0] < (1 - margin) * w)
            & (uv[:, 1] > margin * h)
            & (uv[:, 1] < (1 - margin) * h)
        )
    )


def path_is_safe(q_from: np.ndarray, q_to: np.ndarray, limits: SafetyLimits, samples: int = 20) -> bool:
    path = q_from + np.linspace(0, 1, samples)[:, None] * (q_to - q_from)
    if np.any(path < limits.q_lo) or np.any(path > limits.q_hi):
        return False
    tcp = tcp_position(path, limits.tcp_offset)
    return bool(np.all((tcp >= limits.workspace_min) & (tcp <= limits.workspace_max)))


def _accept(q, prev, limits) -> bool:
    tcp = tcp_position(q, limits.tcp_offset)
    inside = np.all(tcp >= limits.workspace_min) and np.all(tcp <= limits.workspace_max)
    return bool(inside and path_is_safe(prev, q, limits))


def _plan(
    propose: Callable[[], tuple[np.ndarray, np.ndarray]],
    start: np.ndarray,
    n_poses: int,
    max_tries: int,
    limits: SafetyLimits,
    camera_matrix: np.ndarray,
    image_size: tuple[int, int],
) -> PosePlan:
    """Draw ``propose() -> (TCP pose, board corners in the camera frame)`` until ``n_poses`` are
    reachable from the previous pose, keep the whole board in view (4 % margin) and a safe path,
    or ``max_tries`` draws are spent."""
    joints, tcps, prev, rejected = [], [], np.asarray(start, float), 0
    for _ in range(max_tries):
        if len(joints) >= n_poses:
            break
        target, pts_cam = propose()
        q = joints_for(target, prev, limits)
        if (
            q is None
            or not _projects_inside(pts_cam, camera_matrix, image_size, 0.04)
            or not _accept(q, prev, limits)
        ):
            rejected += 1
            continue
        joints.append(q)
        tcps.append(forward_kinematics(q, limits.tcp_offset))
        prev = q
    return PosePlan(joints, tcps, rejected)


def plan_eye_in_hand(
    board_in_base: np.ndarray,
    board_corners: np.ndarray,
    cam_in_tcp: np.ndarray,
    camera_matrix: np.ndarray,
    image_size: tuple[int, int],
    start: np.ndarray,
    n_poses: int = 15,
    distance=(0.28, 0.42),
    max_tilt_deg: float = 30.0,
    seed: int = 0,
    limits: SafetyLimits | None = None,
    max_tries: int = 400,
) -> PosePlan:
    """Wrist-camera poses around the board: on a cap above it, looking at it, with random roll."""
    limits = limits or SafetyLimits.from_yaml()
    rng = np.random.default_rng(seed)
    corners_base = (board_in_base @ np.c_[board_corners, np.ones(len(board_corners))].T).T[:, :3]
    centre = corners_base.mean(axis=0)
    normal = -board_in_base[:3, 2]  # board z points into the board; the camera sits on the other side
    tcp_in_cam = np.linalg.inv(cam_in_tcp)

    def propose() -> tuple[np.ndarray, np.ndarray]:
        tilt, azim = rng.uniform(5, max_tilt_deg), rng.uniform(0, 360)
        axis = rot(normal, azim) @ _perpendicular(normal)
        eye = centre + rot(axis, tilt) @ normal * rng.uniform(*distance)
        cam = look_at(eye, centre + rng.normal(0, 0.02, 3), up=_perpendicular(normal))
        cam[:3, :3] = cam[:3, :3] @ rot([0, 0, 1], rng.uniform(-40, 40))
        pts_cam = (np.linalg.inv(cam) @ np.c_[corners_base, np.ones(len(corners_base))].T).T[:, :3]
        return cam @ tcp_in_cam, pts_cam

    return _plan(propose, start, n_poses, max_tries, limits, camera_matrix, image_size)


def plan_eye_to_hand(
    cam_in_base: np.ndarray,
    board_in_tcp: np.ndarray,
    board_corners: np.ndarray,
    camera_matrix: np.ndarray,
    image_size: tuple[int, int],
    start: np.ndarray,
    workspace_target: Sequence[float] = (0.5, 0.0, 0.3),
    n_poses: int = 20,
    spread: float = 0.12,
    max_tilt_deg: float = 35.0,
    seed: int = 0,
    limits: SafetyLimits | None = None,
    max_tries: int = 400,
) -> PosePlan:
    """Hand poses that show the hand-held board to the fixed camera from varied angles."""
    limits = limits or SafetyLimits.from_yaml()
    rng = np.random.default_rng(seed)
    tcp_in_board = np.linalg.inv(board_in_tcp)
    base_in_cam = np.linalg.inv(cam_in_base)
    centre = np.asarray(workspace_target, float)
    to_cam = cam_in_base[:3, 3] - centre
    to_cam /= np.linalg.norm(to_cam)
    local = np.c_[board_corners, np.ones(len(board_corners))].T

    def propose() -> tuple[np.ndarray, np.ndarray]:
        # Board frame: z into the board, so z must point away from the camera (board faces it).
        board = look_at(centre + rng.uniform(-spread, spread, 3), centre - to_cam)
        board[:3, 3] = centre + rng.uniform(-spread, spread, 3)
        tilt_axis = rng.normal(size=3)
        board[:3, :3] = (
            rot(tilt_axis, rng.uniform(5, max_tilt_deg))
            @ board[:3, :3]
            @ rot([0, 0, 1], rng.uniform(-30, 30))
        )
        return board @ tcp_in_board, (base_in_cam @ board @ local).T[:, :3]

    return _plan(propose, start, n_poses, max_tries, limits, camera_matrix, image_size)


def _perpendicular(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, float)
    a = np.array([1.0, 0.0, 0.0]) if abs(v[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    p = np.cross(v, a)
    return p / np.linalg.norm(p)


def plan_intrinsics_views(
    board_in_base: np.ndarray,
    board_corners: np.ndarray,
    camera_matrix: np.ndarray,
    image_size: tuple[int, int],
    n_views: int = 20,
    distance=(0.3, 0.6),
    max_tilt_deg: float = 40.0,
    seed: int = 0,
    min_visible: float = 0.7,
) -> list[np.ndarray]:
    """Camera poses (T_base_cam) seeing the board tilted and in every part of the image.

    The board is put off-centre on purpose (the camera is turned away from it by up to 0.6 of
    the half field of view), so the views cover the image borders where distortion lives.
    """
    rng = np.random.default_rng(seed)
    corners = (board_in_base @ np.c_[board_corners, np.ones(len(board_corners))].T).T[:, :3]
    centre = corners.mean(axis=0)
    normal = -board_in_base[:3, 2]
    w, h = image_size
    half_x = np.degrees(np.arctan(w / 2 / camera_matrix[0, 0]))
    half_y = np.degrees(np.arctan(h / 2 / camera_matrix[1, 1]))
    views: list[np.ndarray] = []
    for _ in range(50 * n_views):
        if len(views) >= n_views:
            break
        axis = rot(normal, rng.uniform(0, 360)) @ _perpendicular(normal)
        eye = centre + rot(axis, rng.uniform(0, max_tilt_deg)) @ normal * rng.uniform(*distance)
        cam = look_at(eye, centre, up=_perpendicular(normal))
        turn = rot([0, 1, 0], rng.uniform(-0.6, 0.6) * half_x) @ rot(
            [1, 0, 0], rng.uniform(-0.6, 0.6) * half_y
        )
        cam[:3, :3] = cam[:3, :3] @ turn @ rot([0, 0, 1], rng.uniform(-45, 45))
        pts = (np.linalg.inv(cam) @ np.c_[corners, np.ones(len(corners))].T).T[:, :3]
        if np.any(pts[:, 2] < 0.05):
            continue
        uv = (camera_matrix @ (pts.T / pts[:, 2])).T[:, :2]
        inside = (uv[:, 0] > 2) & (uv[:, 0] < w - 3) & (uv[:, 1] > 2) & (uv[:, 1] < h - 3)
        if inside.mean() >= min_visible:
            views.append(cam)
    return views
