"""RoboTwin <-> our contract, in numpy only (unit-tested on synthetic arrays, no RoboTwin needed).

RoboTwin's bimanual joint vector (observation ``state`` and ``qpos`` actions alike) is
``[left arm (dof), left gripper, right arm (dof), right gripper]``, grippers normalized to [0, 1]
(0 closed, 1 open). Actions are absolute joint targets; ours are deltas on the measured joints
(as the franka node applies them), so the target is measured + delta for the driven arm, the
measured pose for the other. RoboTwin reports no joint velocities or end pose in its state: the
velocity is the finite difference over one control tick, the TCP pose our FR3/Panda FK.
"""

from __future__ import annotations

import numpy as np

from rlinf_robot.robot.franka.model import GRIPPER_MAX_WIDTH, forward_kinematics
from rlinf_robot.rotations import canonical, quat_from_matrix


def arm_columns(arm: str, dof: int = 7) -> tuple[slice, int]:
    """(joint slice, gripper column) of ``arm`` in RoboTwin's bimanual vector."""
    start = 0 if arm == "left" else dof + 1
    return slice(start, start + dof), start + dof


def to_robotwin_action(
    actions: np.ndarray, qpos: np.ndarray, arm: str, gripper: bool, dof: int = 7
) -> np.ndarray:
    """Our joint_delta [N, dof(+1)] + measured bimanual qpos [N, 2(dof+1)] -> absolute targets."""
    a = np.asarray(actions, np.float64)
    target = np.asarray(qpos, np.float64).copy()
    joints, grip = arm_columns(arm, dof)
    target[:, joints] += a[:, :dof]
    if gripper:
        target[:, grip] = np.clip(a[:, dof] / GRIPPER_MAX_WIDTH, 0.0, 1.0)
    return target


def robot_state(
    qpos: np.ndarray, prev_qpos: np.ndarray | None, dt: float, arm: str, dof: int = 7
) -> np.ndarray:
    """ROBOT_STATE_FIELDS [N, 22] of the driven arm, in that arm's base frame."""
    qpos = np.asarray(qpos, np.float64)
    joints, grip = arm_columns(arm, dof)
    q = qpos[:, joints]
    qd = np.zeros_like(q) if prev_qpos is None else (q - np.asarray(prev_qpos, np.float64)[:, joints]) / dt
    t = forward_kinematics(q).reshape(-1, 4, 4)
    quat = canonical(quat_from_matrix(t[:, :3, :3]))
    width = qpos[:, grip : grip + 1] * GRIPPER_MAX_WIDTH
    return np.concatenate([q, qd, t[:, :3, 3], quat, width], axis=1).astype(np.float32)


def other_arm(qpos: np.ndarray, arm: str, dof: int = 7) -> np.ndarray:
    """The held arm's joints + gripper [N, dof + 1] (a task column: it can be in the way)."""
    other = "left" if arm == "right" else "right"
    joints, grip = arm_columns(other, dof)
    q = np.asarray(qpos, np.float32)
    return np.concatenate([q[:, joints], q[:, grip : grip + 1]], axis=1)


def square_resize(image: np.ndarray, size: int) -> np.ndarray:
    """Centre-crop an [H, W, 3] image to a square, then nearest-neighbour resize to size x size."""
    h, w = image.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    idx = (np.arange(size) * side / size).astype(int)
    return np.ascontiguousarray(image[top + idx][:, left + idx, :3]).astype(np.uint8)
