"""TCP pose <-> joints for backends that drive the arm in joint space only.

franky cannot switch between joint and Cartesian control signals while a motion runs, and
franka-sim reports a different EE frame than the real TCP; resolving Cartesian targets to joint
targets with our own FK (the one the safety filter uses) keeps one control signal and one TCP
definition everywhere. Targets are at most one safety step away (2 cm / 0.1 rad), so damped least
squares from the current configuration converges in a few iterations.
"""

from __future__ import annotations

import numpy as np

from rlinf_robot.safety import fr3_forward_kinematics
from rlinf_robot.safety.rotations import quat_from_matrix, quat_to_matrix


def tcp_pose(q: np.ndarray, tcp_offset: float = 0.1034) -> np.ndarray:
    """[x, y, z, qw, qx, qy, qz] of the TCP in the base frame."""
    t = fr3_forward_kinematics(q, tcp_offset)
    return np.concatenate([t[:3, 3], quat_from_matrix(t[:3, :3])])


def _rot_error(r_target: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Rotation vector (base frame) taking ``r`` to ``r_target``, via the skew part (small angles)."""
    e = r_target @ r.T
    return 0.5 * np.array([e[2, 1] - e[1, 2], e[0, 2] - e[2, 0], e[1, 0] - e[0, 1]])


def solve_ik(
    target: np.ndarray,
    q0: np.ndarray,
    tcp_offset: float = 0.1034,
    q_lo: np.ndarray | None = None,
    q_hi: np.ndarray | None = None,
    iterations: int = 30,
    tol: float = 1e-6,
    damping: float = 1e-3,
) -> np.ndarray:
    """Joint positions near ``q0`` whose TCP is at ``target`` ([7]: xyz + wxyz quaternion)."""
    p_t = np.asarray(target[:3], dtype=np.float64)
    r_t = quat_to_matrix(np.asarray(target[3:], dtype=np.float64))
    q = np.array(q0, dtype=np.float64)
    eps = 1e-6
    for _ in range(iterations):
        t = fr3_forward_kinematics(q, tcp_offset)
        err = np.concatenate([p_t - t[:3, 3], _rot_error(r_t, t[:3, :3])])
        if np.linalg.norm(err) < tol:
            break
        qs = q + eps * np.eye(7)
        ts = fr3_forward_kinematics(qs, tcp_offset)  # batched: [7, 4, 4]
        jac = np.empty((6, 7))
        for i in range(7):
            jac[:3, i] = (ts[i, :3, 3] - t[:3, 3]) / eps
            jac[3:, i] = _rot_error(ts[i, :3, :3], t[:3, :3]) / eps
        jjt = jac @ jac.T + damping**2 * np.eye(6)
        q = q + jac.T @ np.linalg.solve(jjt, err)
        if q_lo is not None and q_hi is not None:
            q = np.clip(q, q_lo, q_hi)
    return q
