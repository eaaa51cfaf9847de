"""Isaac Lab <-> our contract, in numpy only (unit-tested on synthetic arrays, no Isaac Sim needed).

What Isaac Lab's Franka tasks expose, per batch of N envs (all read once per step as whole tensors):

* joints ``robot.data.joint_pos`` / ``joint_vel`` [N, 9] (7 arm + 2 fingers, order from find_joints);
* the hand body pose ``body_pos_w`` / ``body_quat_w`` and the root pose ``root_pos_w`` /
  ``root_quat_w`` in the world frame (each env sits at its own origin, so we always go to the
  robot's base frame);
* quaternions are (w, x, y, z) up to Isaac Lab 2.x and (x, y, z, w) from 3.0 on - ``quat_order``
  says which, everything here converts to our w x y z.

Actions: ``ee_delta`` goes to the task's differential-IK relative action term (``*-IK-Rel-v0``): it
adds ``raw * scale`` to the pose of a point ``ik_offset`` past the hand (translation in the root
frame, rotation as a rotation vector left-multiplied: the same semantics as ours, about a point
3.6 mm further out, which we correct for). ``joint_delta`` goes to a RelativeJointPositionAction
(current joint positions + raw). The gripper is Isaac Lab's binary action: > 0 opens, < 0 closes.
"""

from __future__ import annotations

import numpy as np

from rlinf_robot.robot.franka.model import GRIPPER_MAX_WIDTH, TCP_OFFSET
from rlinf_robot.rotations import (
    canonical,
    quat_conjugate,
    quat_multiply,
    quat_rotate,
    quat_to_matrix,
    rotvec_to_matrix,
)


def to_wxyz(q: np.ndarray, quat_order: str) -> np.ndarray:
    if quat_order == "wxyz":
        return q
    if quat_order == "xyzw":
        return q[..., [3, 0, 1, 2]]
    raise ValueError(f"quat_order must be 'wxyz' or 'xyzw', got {quat_order!r}")


def robot_state(
    joint_pos, joint_vel, hand_pos_w, hand_quat_w, root_pos_w, root_quat_w, quat_order: str = "wxyz"
) -> np.ndarray:
    """[N, 22] ROBOT_STATE_FIELDS in the robot base frame (TCP ``TCP_OFFSET`` past the hand)."""
    hand_q = to_wxyz(np.asarray(hand_quat_w, np.float64), quat_order)
    root_q = to_wxyz(np.asarray(root_quat_w, np.float64), quat_order)
    n = len(hand_q)
    tcp_w = hand_pos_w + quat_rotate(hand_q, np.tile([0.0, 0.0, TCP_OFFSET], (n, 1)))
    inv = quat_conjugate(root_q)
    tcp_b = quat_rotate(inv, tcp_w - root_pos_w)
    quat_b = canonical(quat_multiply(inv, hand_q))
    jp, jv = np.asarray(joint_pos, np.float64), np.asarray(joint_vel, np.float64)
    width = jp[:, 7:8] + jp[:, 8:9]
    return np.concatenate([jp[:, :7], jv[:, :7], tcp_b, quat_b, width], axis=1).astype(np.float32)


def points_in_base(
    points_w: np.ndarray, root_pos_w: np.ndarray, root_quat_w: np.ndarray, quat_order: str = "wxyz"
) -> np.ndarray:
    return quat_rotate(
        quat_conjugate(to_wxyz(np.asarray(root_quat_w, np.float64), quat_order)), points_w - root_pos_w
    )


def ee_delta_action(
    actions: np.ndarray,
    tcp_quat_b: np.ndarray,
    scale: float,
    ik_offset: float,
    gripper: bool,
    hold_open: bool = True,
) -> np.ndarray:
    """Our [N, 6(+1)] ee_delta -> the IK-Rel task's raw action [N, 7] (6 pose + binary gripper).

    The IK term moves a point ``ik_offset`` past the hand, ours ``TCP_OFFSET`` past it; rotating by R
    about our TCP moves their point by (R - I) R_now d, d = (ik_offset - TCP_OFFSET) along the hand z.
    """
    a = np.asarray(actions, np.float64)
    dp, rot = a[:, :3], a[:, 3:6]
    r_now = quat_to_matrix(np.asarray(tcp_quat_b, np.float64))
    d = r_now @ np.array([0.0, 0.0, ik_offset - TCP_OFFSET])
    shift = np.einsum("nij,nj->ni", rotvec_to_matrix(rot), d) - d
    pose = np.concatenate([dp + shift, rot], axis=1) / scale
    grip = gripper_binary(a[:, 6] if gripper else None, len(a), hold_open)
    return np.concatenate([pose, grip[:, None]], axis=1).astype(np.float32)


def joint_delta_action(actions: np.ndarray, gripper: bool, hold_open: bool = True) -> np.ndarray:
    """Our [N, 7(+1)] joint_delta -> RelativeJointPositionAction raw [N, 7] + binary gripper."""
    a = np.asarray(actions, np.float64)
    grip = gripper_binary(a[:, 7] if gripper else None, len(a), hold_open)
    return np.concatenate([a[:, :7], grip[:, None]], axis=1).astype(np.float32)


def gripper_binary(width: np.ndarray | None, n: int, hold_open: bool = True) -> np.ndarray:
    """Finger opening (m) -> Isaac Lab's binary gripper: open (+1) above half way, else close (-1)."""
    if width is None:
        return np.full(n, 1.0 if hold_open else -1.0)
    return np.where(np.asarray(width) > GRIPPER_MAX_WIDTH / 2, 1.0, -1.0)
