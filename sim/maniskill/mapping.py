"""ManiSkill <-> our contract, in numpy only (unit-tested on synthetic arrays, no ManiSkill needed).

Actions: ours are physical (rad per tick, m per tick, world-frame rotation vector, finger opening in
m). ManiSkill's Panda controllers take normalized [-1, 1] actions that they scale themselves:
``pd_joint_delta_pos`` maps a to ``low + (a + 1) / 2 * (high - low)`` rad; ``pd_ee_delta_pose`` does
the same for translation (m) but multiplies the rotation by its ``rot_lower`` (a negative number, so
the sign flips) and reads it as intrinsic XYZ Euler angles applied in the root-aligned frame
(``q_target = dq * q``, the same left-multiplication our ee_delta uses). The gripper's mimic joint
controller takes the per-finger position the same way as the joint controller.

Observations: ManiSkill reports poses in its world frame, where the robot base stands at
``agent.robot.pose`` (x = -0.615 m); our robot state is in the base frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlinf_robot.robot.franka.model import GRIPPER_MAX_WIDTH
from rlinf_robot.rotations import canonical, quat_conjugate, quat_multiply, quat_rotate, rotvec_to_matrix

CONTROL_MODES = {"joint_delta": "pd_joint_delta_pos", "ee_delta": "pd_ee_delta_pose"}


@dataclass(frozen=True)
class ControllerScales:
    """What ManiSkill's controllers multiply normalized actions by (read from its controller configs)."""

    arm_low: float  # rad (joint) or m (ee translation)
    arm_high: float
    rot_scale: float = -0.1  # ee rotation: normalized * rot_scale = Euler angles (rad)
    grip_low: float = -0.01  # per-finger position range (m)
    grip_high: float = 0.04

    @classmethod
    def from_configs(cls, configs: dict) -> ControllerScales:
        arm, grip = configs["arm"], configs["gripper"]
        low = getattr(arm, "pos_lower", None)
        if low is None:  # joint controller
            return cls(float(arm.lower), float(arm.upper), -0.1, float(grip.lower), float(grip.upper))
        return cls(
            float(arm.pos_lower),
            float(arm.pos_upper),
            float(arm.rot_lower),
            float(grip.lower),
            float(grip.upper),
        )


def _unscale(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """Inverse of ManiSkill's clip_and_scale_action: value -> normalized."""
    return 2.0 * (x - low) / (high - low) - 1.0


def rotvec_to_euler_xyz(r: np.ndarray) -> np.ndarray:
    """Rotation vectors [N, 3] -> intrinsic XYZ Euler angles (R = Rx(a) Ry(b) Rz(c)), ManiSkill's
    ``euler_angles_to_matrix(.., "XYZ")`` convention."""
    m = rotvec_to_matrix(r)
    b = np.arcsin(np.clip(m[..., 0, 2], -1.0, 1.0))
    a = np.arctan2(-m[..., 1, 2], m[..., 2, 2])
    c = np.arctan2(-m[..., 0, 1], m[..., 0, 0])
    return np.stack([a, b, c], axis=-1)


def to_maniskill_action(
    actions: np.ndarray,
    mode: str,
    gripper: bool,
    scales: ControllerScales,
    hold_width: float = GRIPPER_MAX_WIDTH,
) -> np.ndarray:
    """Our actions [N, A] -> ManiSkill normalized actions [N, 7 (ee) | 8 (joint)], float32."""
    a = np.asarray(actions, np.float64)
    if mode == "joint_delta":
        arm = _unscale(a[:, :7], scales.arm_low, scales.arm_high)
        rest = a[:, 7:]
    else:
        pos = _unscale(a[:, :3], scales.arm_low, scales.arm_high)
        rot = rotvec_to_euler_xyz(a[:, 3:6]) / scales.rot_scale
        arm = np.concatenate([pos, rot], axis=1)
        rest = a[:, 6:]
    width = rest[:, 0] if gripper else np.full(len(a), hold_width)
    grip = _unscale(width / 2.0, scales.grip_low, scales.grip_high)
    return np.clip(np.concatenate([arm, grip[:, None]], axis=1), -1.0, 1.0).astype(np.float32)


def robot_state(
    qpos: np.ndarray, qvel: np.ndarray, tcp_pose: np.ndarray, root_pose: np.ndarray
) -> np.ndarray:
    """ManiSkill Panda state -> our ROBOT_STATE_FIELDS [N, 22] (base frame, canonical quaternion)."""
    root_p, root_q = root_pose[:, :3], root_pose[:, 3:7]
    inv = quat_conjugate(root_q)
    tcp_p = quat_rotate(inv, tcp_pose[:, :3] - root_p)
    tcp_q = canonical(quat_multiply(inv, tcp_pose[:, 3:7]))
    width = qpos[:, 7:8] + qpos[:, 8:9]
    return np.concatenate([qpos[:, :7], qvel[:, :7], tcp_p, tcp_q, width], axis=1).astype(np.float32)


def task_fields(extra: dict[str, np.ndarray], num_envs: int, skip: tuple[str, ...] = ("tcp_pose",)):
    """ManiSkill's task observations (``obs["extra"]``) as named columns, in sorted key order."""
    names, cols = [], []
    for key in sorted(extra):
        if key in skip:
            continue
        v = np.asarray(extra[key], np.float32).reshape(num_envs, -1)
        names.append((key, v.shape[1]))
        cols.append(v)
    values = np.concatenate(cols, axis=1) if cols else np.zeros((num_envs, 0), np.float32)
    return tuple(names), values
