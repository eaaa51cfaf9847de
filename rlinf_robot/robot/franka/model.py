"""The FR3: every fact about the arm that more than one module needs, defined once.

Joint names, the home pose, the TCP (the Franka Hand's fingertip centre, ``TCP_OFFSET`` past the
flange), the gripper's range, forward kinematics, the TCP Jacobian and the one inverse-kinematics
solver. The safety filter, the bridge, ``franka_node``, the simulators and calibration all take
them from here, so the arm the sim scores is the arm the robot PC drives.

Kinematics come from Franka's published DH table (Craig's modified convention), in numpy: exact
enough (the datasheet parameters; ``tests/robot/test_fr3_model.py`` checks FK and the Jacobian
against MuJoCo's own kinematics of the franky-sim model) and light enough for a robot PC. Every
function takes one configuration ``[7]`` or a batch ``[N, 7]`` and answers in the same form.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from rlinf_robot.rotations import quat_from_matrix, quat_to_matrix, small_rotation_error

NUM_JOINTS = 7
JOINT_NAMES = tuple(f"fr3_joint{i}" for i in range(1, NUM_JOINTS + 1))
#: ROS JointState name of the gripper: its position is half the finger opening.
FINGER_JOINT_NAME = "fr3_finger_joint1"
#: Franka's "ready" pose (libfranka's examples, franka-sim's keyframe ``home``).
HOME_Q = np.array([0.0, 0.0, 0.0, -1.57, 0.0, 1.57, 0.785])
HOME_Q.flags.writeable = False  # shared by every importer: copy it to change it
#: Flange -> TCP along the flange z axis (m): the Franka Hand's fingertip centre.
TCP_OFFSET = 0.1034
GRIPPER_MAX_WIDTH = 0.08  # m, Franka Hand

# (a_{i-1}, d_i, alpha_{i-1}) per joint, metres and radians; then the flange (d = 0.107).
DH = np.array(
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
#: The hand sits -45 deg about the flange z axis (libfranka's ``O_T_EE`` with the default hand).
HAND_YAW = -np.pi / 4
_COS_ALPHA, _SIN_ALPHA = np.cos(DH[:, 2]), np.sin(DH[:, 2])


def _as_batch(q: np.ndarray) -> tuple[np.ndarray, bool]:
    q = np.asarray(q, dtype=np.float64)
    if q.shape[-1] != NUM_JOINTS:
        raise ValueError(f"FR3 joint vectors have {NUM_JOINTS} entries, got shape {q.shape}")
    return q.reshape(-1, NUM_JOINTS), q.ndim == 1


@functools.lru_cache(maxsize=8)
def _link_constants(tcp_offset: float) -> tuple[np.ndarray, ...]:
    """a, d, cos(alpha), sin(alpha) of the eight links (the last one: flange + TCP offset)."""
    return (
        np.append(DH[:, 0], 0.0),
        np.append(DH[:, 1], FLANGE_D + tcp_offset),
        np.append(_COS_ALPHA, 1.0),
        np.append(_SIN_ALPHA, 0.0),
    )


def _links(q: np.ndarray, tcp_offset: float) -> np.ndarray:
    """The eight link transforms [N, 8, 4, 4] of joint vectors ``q`` [N, 7], in one vectorized pass.

    Link i is RotX(alpha) TransX(a) RotZ(theta) TransZ(d); the eighth "link" is the flange plus the
    TCP offset, turned by the hand's yaw."""
    n = q.shape[0]
    theta = np.concatenate([q, np.full((n, 1), HAND_YAW)], axis=1)  # [N, 8]
    a, d, ca, sa = _link_constants(float(tcp_offset))
    ct, st = np.cos(theta), np.sin(theta)
    links = np.zeros((n, NUM_JOINTS + 1, 4, 4))
    links[..., 0, 0], links[..., 0, 1], links[..., 0, 3] = ct, -st, a
    links[..., 1, 0], links[..., 1, 1], links[..., 1, 2], links[..., 1, 3] = st * ca, ct * ca, -sa, -sa * d
    links[..., 2, 0], links[..., 2, 1], links[..., 2, 2], links[..., 2, 3] = st * sa, ct * sa, ca, ca * d
    links[..., 3, 3] = 1.0
    return links


def frames(q: np.ndarray, tcp_offset: float = TCP_OFFSET) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Joint axes ``z`` [N, 7, 3], joint origins ``p`` [N, 7, 3] and the TCP pose [N, 4, 4] (what
    the Jacobian needs; ``forward_kinematics`` chains the same links without keeping the axes)."""
    qb, _ = _as_batch(q)
    links = _links(qb, tcp_offset)
    n = qb.shape[0]
    z = np.empty((n, NUM_JOINTS, 3))
    p = np.empty((n, NUM_JOINTS, 3))
    t = links[:, 0]
    for i in range(NUM_JOINTS):
        if i:
            t = t @ links[:, i]
        z[:, i], p[:, i] = t[:, :3, 2], t[:, :3, 3]
    return z, p, t @ links[:, NUM_JOINTS]


def forward_kinematics(q: np.ndarray, tcp_offset: float = TCP_OFFSET) -> np.ndarray:
    """Base-frame TCP pose (4x4, or [N, 4, 4]). One configuration costs ~40 us: the bridge and the
    arm driver take one per command row and per state sample."""
    qb, single = _as_batch(q)
    links = _links(qb, tcp_offset)
    if single:
        links = links[0]
    t = links[..., 0, :, :]
    for i in range(1, NUM_JOINTS + 1):
        t = t @ links[..., i, :, :]
    return t


def tcp_position(q: np.ndarray, tcp_offset: float = TCP_OFFSET) -> np.ndarray:
    return forward_kinematics(q, tcp_offset)[..., :3, 3]


def tcp_pose(q: np.ndarray, tcp_offset: float = TCP_OFFSET) -> np.ndarray:
    """[x, y, z, qw, qx, qy, qz] of the TCP in the base frame (w >= 0), or [N, 7]."""
    t = forward_kinematics(q, tcp_offset)
    return np.concatenate([t[..., :3, 3], quat_from_matrix(t[..., :3, :3])], axis=-1)


def jacobian(q: np.ndarray, tcp_offset: float = TCP_OFFSET) -> tuple[np.ndarray, np.ndarray]:
    """Geometric TCP Jacobian (rows: linear xyz, angular xyz, base frame; revolute joints:
    ``[z_i x (p - p_i); z_i]``) [6, 7] or [N, 6, 7], and the TCP pose it was taken at."""
    _, single = _as_batch(q)
    z, p, t = frames(q, tcp_offset)
    r = t[:, None, :3, 3] - p  # [N, 7, 3]: joint origin -> TCP
    jv = np.stack(  # z x r, written out (np.cross costs more than the whole FK for one arm)
        [
            z[..., 1] * r[..., 2] - z[..., 2] * r[..., 1],
            z[..., 2] * r[..., 0] - z[..., 0] * r[..., 2],
            z[..., 0] * r[..., 1] - z[..., 1] * r[..., 0],
        ],
        axis=-1,
    )
    jac = np.concatenate([np.swapaxes(jv, 1, 2), np.swapaxes(z, 1, 2)], axis=1)
    return (jac[0], t[0]) if single else (jac, t)


def pose_error(t_target: np.ndarray, t_now: np.ndarray) -> np.ndarray:
    """Translation error (m) and rotation vector (rad), base frame: [6] or [N, 6]."""
    return np.concatenate(
        [
            t_target[..., :3, 3] - t_now[..., :3, 3],
            small_rotation_error(t_target[..., :3, :3], t_now[..., :3, :3]),
        ],
        axis=-1,
    )


def dls_step(jac: np.ndarray, err: np.ndarray, damping: float) -> np.ndarray:
    """Damped least squares: dq = J^T (J J^T + lambda^2 I)^-1 e, batched ([N, 6, 7], [N, 6])."""
    jt = np.swapaxes(jac, -1, -2)
    eye = np.eye(jac.shape[-2])
    return (jt @ np.linalg.solve(jac @ jt + damping**2 * eye, err[..., None]))[..., 0]


@dataclass(frozen=True)
class IKResult:
    q: np.ndarray
    position_error: float  # m
    rotation_error: float  # rad
    iterations: int
    converged: bool


def solve_ik(
    target: np.ndarray,
    q0: np.ndarray,
    tcp_offset: float = TCP_OFFSET,
    q_lo: np.ndarray | None = None,
    q_hi: np.ndarray | None = None,
    damping: float = 1e-3,
    tol_pos: float = 1e-5,
    tol_rot: float = 1e-4,
    max_iter: int = 50,
    max_step: float | None = None,
) -> IKResult:
    """Joint positions near ``q0`` putting the TCP at ``target`` ([7] x y z qw qx qy qz, or 4x4).

    Damped least squares from ``q0``: the minimum-norm step keeps the elbow where it is, so the
    answer is the configuration next to ``q0`` (what a controller stepping towards a nearby
    target wants), not an arbitrary IK branch. Optional joint bounds are enforced at every step;
    ``max_step`` (rad) caps each joint's change per iteration, which keeps a far target (a
    calibration viewpoint rather than a control tick's step) from leaping to another branch.
    """
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
        jac, t_now = jacobian(q, tcp_offset)
        err = pose_error(t_target, t_now)
        pos_err, rot_err = float(np.linalg.norm(err[:3])), float(np.linalg.norm(err[3:]))
        if pos_err < tol_pos and rot_err < tol_rot:
            return IKResult(q, pos_err, rot_err, it, True)
        if it == max_iter:
            break
        dq = dls_step(jac, err, damping)
        q = q + (dq if max_step is None else np.clip(dq, -max_step, max_step))
        if q_lo is not None and q_hi is not None:
            q = np.clip(q, q_lo, q_hi)
    return IKResult(q, float(np.linalg.norm(err[:3])), float(np.linalg.norm(err[3:])), max_iter, False)
