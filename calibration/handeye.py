"""Hand-eye calibration: where the camera is relative to the hand (eye-in-hand) or the robot base
(eye-to-hand), from robot poses and board poses seen by the camera.

Every solver OpenCV ships is run - ``calibrateHandEye`` (Tsai, Park, Horaud, Andreff, Daniilidis)
and ``calibrateRobotWorldHandEye`` (Shah, Li) - and each answer is judged by the same residual:
the calibration target must come out at one fixed place. For eye-in-hand the board is fixed in the
base frame, so ``T_base_board_i = T_base_tcp_i X T_cam_board_i`` should be the same for every view;
for eye-to-hand the board rides on the hand, so ``T_tcp_board_i = T_base_tcp_i^-1 X T_cam_board_i``
should be. The RMS spread of those poses (mm, deg) is the residual; the best method is kept and
all are reported, because which one wins depends on the pose set and the noise.

Transforms are 4x4 ``T_a_b`` (b expressed in a). ``mode``: ``eye_in_hand`` returns ``T_tcp_cam``,
``eye_to_hand`` returns ``T_base_cam``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from calibration.charuco import _cv2

MODES = ("eye_in_hand", "eye_to_hand")
_HANDEYE = ("tsai", "park", "horaud", "andreff", "daniilidis")
_ROBOT_WORLD = ("shah", "li")


def _inv(t: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = t[:3, :3].T
    out[:3, 3] = -t[:3, :3].T @ t[:3, 3]
    return out


def _pose(r: np.ndarray, t: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = r
    out[:3, 3] = np.asarray(t).ravel()
    return out


def _angle_deg(r: np.ndarray) -> float:
    return float(np.degrees(np.arccos(np.clip((np.trace(r) - 1) / 2, -1.0, 1.0))))


def consistency(poses: Sequence[np.ndarray]) -> tuple[float, float, np.ndarray]:
    """(translation RMS mm, rotation RMS deg, mean pose) of poses that should all be equal."""
    p = np.stack(poses)
    t_mean = p[:, :3, 3].mean(axis=0)
    u, _, vt = np.linalg.svd(p[:, :3, :3].sum(axis=0))  # chordal mean rotation
    r_mean = u @ np.diag([1, 1, np.linalg.det(u @ vt)]) @ vt
    trans = float(np.sqrt(np.mean(np.sum((p[:, :3, 3] - t_mean) ** 2, axis=1)))) * 1e3
    rot = float(np.sqrt(np.mean([_angle_deg(r_mean.T @ r) ** 2 for r in p[:, :3, :3]])))
    return trans, rot, _pose(r_mean, t_mean)


@dataclass
class MethodResult:
    transform: np.ndarray
    translation_rms_mm: float
    rotation_rms_deg: float

    @property
    def score(self) -> float:
        """One number to rank methods: 1 mm counts as much as 0.1 deg."""
        return self.translation_rms_mm + 10.0 * self.rotation_rms_deg


@dataclass
class HandEyeResult:
    mode: str
    method: str
    transform: np.ndarray
    target_pose: np.ndarray  # board in base (eye-in-hand) or in the TCP frame (eye-to-hand)
    translation_rms_mm: float
    rotation_rms_deg: float
    methods: dict[str, MethodResult]
    n_views: int
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "method": self.method,
            "transform": self.transform.tolist(),
            "target_pose": self.target_pose.tolist(),
            "translation_rms_mm": self.translation_rms_mm,
            "rotation_rms_deg": self.rotation_rms_deg,
            "n_views": self.n_views,
            "methods": {
                k: {
                    "transform": m.transform.tolist(),
                    "translation_rms_mm": m.translation_rms_mm,
                    "rotation_rms_deg": m.rotation_rms_deg,
                }
                for k, m in self.methods.items()
            },
            "warnings": self.warnings,
        }


def _target_poses(mode: str, x: np.ndarray, tcp_in_base, board_in_cam) -> list[np.ndarray]:
    if mode == "eye_in_hand":
        return [t @ x @ b for t, b in zip(tcp_in_base, board_in_cam, strict=True)]
    return [_inv(t) @ x @ b for t, b in zip(tcp_in_base, board_in_cam, strict=True)]


def _solve_handeye(cv2, mode, method, tcp_in_base, board_in_cam) -> np.ndarray:
    flag = getattr(cv2, f"CALIB_HAND_EYE_{method.upper()}")
    robot = tcp_in_base if mode == "eye_in_hand" else [_inv(t) for t in tcp_in_base]
    r, t = cv2.calibrateHandEye(
        [p[:3, :3] for p in robot],
        [p[:3, 3].reshape(3, 1) for p in robot],
        [b[:3, :3] for b in board_in_cam],
        [b[:3, 3].reshape(3, 1) for b in board_in_cam],
        method=flag,
    )
    return _pose(r, t)


def _solve_robot_world(cv2, mode, method, tcp_in_base, board_in_cam) -> np.ndarray:
    """AX = ZB form. Eye-in-hand: world = board, cam on gripper -> X = (gripper2cam)^-1.
    Eye-to-hand: the roles swap - the board rides on the gripper (the 'camera' of the
    formulation) and the camera is fixed to the base (the 'world') -> X = (base2world)^-1."""
    flag = getattr(cv2, f"CALIB_ROBOT_WORLD_HAND_EYE_{method.upper()}")
    base2gripper = [_inv(t) for t in tcp_in_base]
    world2cam = board_in_cam if mode == "eye_in_hand" else [_inv(b) for b in board_in_cam]
    r_bw, t_bw, r_gc, t_gc = cv2.calibrateRobotWorldHandEye(
        [w[:3, :3] for w in world2cam],
        [w[:3, 3].reshape(3, 1) for w in world2cam],
        [b[:3, :3] for b in base2gripper],
        [b[:3, 3].reshape(3, 1) for b in base2gripper],
        method=flag,
    )
    if mode == "eye_in_hand":
        return _inv(_pose(r_gc, t_gc))
    return _inv(_pose(r_bw, t_bw))


def calibrate_handeye(
    tcp_in_base: Sequence[np.ndarray],
    board_in_cam: Sequence[np.ndarray],
    mode: str = "eye_in_hand",
    methods: Sequence[str] = _HANDEYE + _ROBOT_WORLD,
    max_translation_rms_mm: float = 2.0,
    max_rotation_rms_deg: float = 0.2,
) -> HandEyeResult:
    """Run every method on paired robot/board poses and keep the one with the smallest residual."""
    if mode not in MODES:
        raise ValueError(f"hand-eye mode {mode!r} not in {MODES}")
    if len(tcp_in_base) != len(board_in_cam):
        raise ValueError(f"{len(tcp_in_base)} robot poses but {len(board_in_cam)} board poses")
    if len(tcp_in_base) < 3:
        raise ValueError(f"hand-eye needs at least 3 views, got {len(tcp_in_base)}")
    unknown = sorted(set(methods) - set(_HANDEYE + _ROBOT_WORLD))
    if unknown:
        raise ValueError(f"unknown hand-eye method(s) {unknown}; known: {list(_HANDEYE + _ROBOT_WORLD)}")
    cv2 = _cv2()
    tcp = [np.asarray(t, dtype=np.float64) for t in tcp_in_base]
    board = [np.asarray(b, dtype=np.float64) for b in board_in_cam]
    results: dict[str, MethodResult] = {}
    warnings: list[str] = []
    for name in methods:
        solve = _solve_handeye if name in _HANDEYE else _solve_robot_world
        try:
            x = solve(cv2, mode, name, tcp, board)
        except cv2.error as exc:
            warnings.append(f"{name}: OpenCV failed ({str(exc).splitlines()[-1]})")
            continue
        if not np.all(np.isfinite(x)):
            warnings.append(f"{name}: non-finite result")
            continue
        trans, rot, _ = consistency(_target_poses(mode, x, tcp, board))
        results[name] = MethodResult(x, trans, rot)
    if not results:
        raise ValueError(f"every hand-eye method failed: {warnings}")
    best = min(results, key=lambda k: results[k].score)
    chosen = results[best]
    _, _, target = consistency(_target_poses(mode, chosen.transform, tcp, board))
    if chosen.translation_rms_mm > max_translation_rms_mm or chosen.rotation_rms_deg > max_rotation_rms_deg:
        warnings.append(
            f"residual {chosen.translation_rms_mm:.2f} mm / {chosen.rotation_rms_deg:.3f} deg above the bounds "
            f"{max_translation_rms_mm} mm / {max_rotation_rms_deg} deg: check the views and the robot poses"
        )
    return HandEyeResult(
        mode,
        best,
        chosen.transform,
        target,
        chosen.translation_rms_mm,
        chosen.rotation_rms_deg,
        results,
        len(tcp),
        warnings,
    )


def transform_error(estimate: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """(translation error mm, rotation error deg) between two 4x4 transforms."""
    d = _inv(truth) @ estimate
    return float(np.linalg.norm(d[:3, 3]) * 1e3), _angle_deg(d[:3, :3])
