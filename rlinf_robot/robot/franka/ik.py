"""Damped-least-squares inverse kinematics on our own FR3 forward kinematics.

Why IK here instead of franky's Cartesian motions: franky forbids switching the control signal
type (joint vs Cartesian) while the arm moves, and the node must blend joint and EE commands at
the control rate; and franka-sim's reported ``O_T_EE`` is not the TCP our FK (and the safety
filter's workspace box) uses. Converting each per-tick EE target into a joint target on the
*same* FK keeps one control signal, one frame, and tracks the TCP to well below a millimetre.

    dq = J^T (J J^T + lambda^2 I)^-1 e,   e = [p* - p ; rotvec(R* R^T)]

The per-tick targets the safety filter hands over are at most a few millimetres away, so a handful
of iterations from the current joint position converge; the minimum-norm step keeps the elbow
where it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlinf_robot.safety.kinematics import FLANGE_D, FR3_DH
from rlinf_robot.safety.rotations import quat_to_matrix


@dataclass(frozen=True)
class IKResult:
    q: np.ndarray
    position_error: float  # m
    rotation_error: float  # rad
    iterations: int
    converged: bool


def _rotvec_from_matrix(r: np.ndarray) -> np.ndarray:
    cos = np.clip((np.trace(r) - 1.0) / 2.0, -1.0, 1.0)
    angle = float(np.arccos(cos))
    if angle < 1e-9:
        return np.zeros(3)
    axis = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    s = np.linalg.norm(axis)
    if s < 1e-9:  # angle ~ pi: take the axis from the symmetric part
        m = (r + np.eye(3)) / 2.0
        axis = m[:, int(np.argmax(np.diag(m)))]
        s = np.linalg.norm(axis)
    return angle * axis / s


def pose_error(t_target: np.ndarray, t_now: np.ndarray) -> np.ndarray:
    """6-vector: translation error (m) and rotation vector (rad), both in the base frame."""
    return np.concatenate(
        [t_target[:3, 3] - t_now[:3, 3], _rotvec_from_matrix(t_target[:3, :3] @ t_now[:3, :3].T)]
    )


def _frames(q: np.ndarray, tcp_offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Joint axes/origins (7 frames, Craig's modified DH as in ``safety.kinematics``) and the TCP pose."""
    t = np.eye(4)
    z = np.empty((7, 3))
    p = np.empty((7, 3))
    for i, (a, d, alpha) in enumerate(FR3_DH):
        t = t @ _dh(a, d, alpha, q[i])
        z[i], p[i] = t[:3, 2], t[:3, 3]
    t = t @ _dh(0.0, FLANGE_D + tcp_offset, 0.0, -np.pi / 4)
    return np.stack([z, p]), t


def tcp_pose(q: np.ndarray, tcp_offset: float) -> np.ndarray:
    """4x4 TCP pose for one configuration: ``fr3_forward_kinematics`` without its batching
    overhead (a few times faster), for the state published every control tick."""
    return _frames(np.asarray(q, dtype=np.float64), tcp_offset)[1]


def _dh(a: float, d: float, alpha: float, theta: float) -> np.ndarray:
    ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    return np.array(
        [
            [ct, -st, 0.0, a],
            [st * ca, ct * ca, -sa, -sa * d],
            [st * sa, ct * sa, ca, ca * d],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )


def jacobian(q: np.ndarray, tcp_offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Geometric 6x7 Jacobian of the TCP (revolute joints: [z_i x (p - p_i); z_i]) and the TCP pose."""
    (z, p), t = _frames(np.asarray(q, dtype=np.float64), tcp_offset)
    jv = np.cross(z, t[:3, 3] - p)
    return np.concatenate([jv.T, z.T]), t


def solve_ik(
    target: np.ndarray,
    q0: np.ndarray,
    tcp_offset: float = 0.1034,
    damping: float = 1e-3,
    tol_pos: float = 1e-5,
    tol_rot: float = 1e-4,
    max_iter: int = 50,
) -> IKResult:
    """Joint positions putting the TCP at ``target`` ([7] x y z qw qx qy qz, or a 4x4 matrix)."""
    target = np.asarray(target, dtype=np.float64)
    if target.shape == (7,):
        t_target = np.eye(4)
        t_target[:3, :3] = quat_to_matrix(target[3:])
        t_target[:3, 3] = target[:3]
    else:
        t_target = target
    q = np.asarray(q0, dtype=np.float64).copy()
    err = np.zeros(6)
    for it in range(max_iter + 1):
        j, t_now = jacobian(q, tcp_offset)
        err = pose_error(t_target, t_now)
        pos_err, rot_err = float(np.linalg.norm(err[:3])), float(np.linalg.norm(err[3:]))
        if pos_err < tol_pos and rot_err < tol_rot:
            return IKResult(q, pos_err, rot_err, it, True)
        if it == max_iter:
            break
        jjt = j @ j.T + (damping**2) * np.eye(6)
        q = q + j.T @ np.linalg.solve(jjt, err)
    return IKResult(q, float(np.linalg.norm(err[:3])), float(np.linalg.norm(err[3:])), max_iter, False)
