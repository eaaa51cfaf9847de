"""FR3 forward kinematics from Franka's published DH table (Craig's modified convention).

The safety filter needs the end-effector position of a *joint* target to check it against the
workspace box before the arm moves; a 7-joint DH chain in numpy is exact enough (the FR3 datasheet
parameters) and keeps the robot side free of MuJoCo or Pinocchio.
"""

from __future__ import annotations

import numpy as np

# (a_{i-1}, d_i, alpha_{i-1}) per joint, metres and radians; then the flange (d = 0.107).
FR3_DH = np.array(
    [
        [0.0, 0.333, 0.0],
        [0.0, 0.0, -np.pi / 2],
        [0.0, 0.316, np.pi / 2],
        [0.0825, 0.0, np.pi / 2],
        [-0.0825, 0.384, -np.pi / 2],
        [0.0, 0.0, np.pi / 2],
        [0.088, 0.0, np.pi / 2],
    ]
)
FLANGE_D = 0.107


def _link(a: float, d: float, alpha: float, theta: np.ndarray) -> np.ndarray:
    """RotX(alpha) TransX(a) RotZ(theta) TransZ(d), batched over theta."""
    ct, st = np.cos(theta), np.sin(theta)
    ca, sa = np.cos(alpha), np.sin(alpha)
    n = theta.shape[0]
    t = np.zeros((n, 4, 4))
    t[:, 0, 0], t[:, 0, 1], t[:, 0, 3] = ct, -st, a
    t[:, 1, 0], t[:, 1, 1], t[:, 1, 2], t[:, 1, 3] = st * ca, ct * ca, -sa, -sa * d
    t[:, 2, 0], t[:, 2, 1], t[:, 2, 2], t[:, 2, 3] = st * sa, ct * sa, ca, ca * d
    t[:, 3, 3] = 1.0
    return t


def fr3_forward_kinematics(q: np.ndarray, tcp_offset: float = 0.1034) -> np.ndarray:
    """Base-frame pose (4x4) of the TCP for joint positions ``q`` ([7] or [N, 7]).

    ``tcp_offset`` is the distance from the flange to the TCP along the flange z axis (0.1034 m
    for the Franka Hand's fingertip centre); the hand's -45 deg rotation about z is applied too, so
    the orientation matches libfranka's ``O_T_EE`` with the default end effector.
    """
    q = np.asarray(q, dtype=np.float64)
    single = q.ndim == 1
    qb = q.reshape(-1, 7)
    t = np.broadcast_to(np.eye(4), (qb.shape[0], 4, 4)).copy()
    for i, (a, d, alpha) in enumerate(FR3_DH):
        t = t @ _link(a, d, alpha, qb[:, i])
    zero = np.zeros(qb.shape[0])
    t = t @ _link(0.0, FLANGE_D + tcp_offset, 0.0, zero - np.pi / 4)
    return t[0] if single else t
