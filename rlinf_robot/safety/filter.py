"""The safety filter: every command to the arm passes here first.

``check(action, state)`` turns a policy's action into an *absolute* target the arm may execute
(``joint_position`` or ``ee_target``), or refuses it with a reason. ``state`` is the reference: a
delta is added to it and the step is measured from it, and the caller chooses it. ``FrankaArm``
passes its *commanded* joints (``q_d``), not the measured ones; the bridge resolves delta chunks
itself (``safety.deltas``: each row relative to the previous row's target, row 0 to the last
commanded one) and checks each row's target with ``check_target``.

Order of checks: shape -> finite -> joint limits (joint modes: reject an absolute target outside
them, clamp a delta's; an EE target's joints are checked after IK, by ``robot.franka.goals``) ->
workspace box on the target's TCP, for modes whose policy is ``reject`` -> step size (scale the
move down to what one control tick may do) -> workspace box on the scaled move (clamp it into the
box) -> gripper range. Every decision is counted, so diagnostics can show how often a policy is
being corrected.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

import numpy as np

from rlinf_robot.robot.franka import model
from rlinf_robot.rotations import quat_angle, quat_conjugate, quat_from_rotvec, quat_multiply, quat_to_rotvec
from rlinf_robot.safety.limits import SafetyLimits

ACTION_WIDTH = {"joint_position": 7, "joint_delta": 7, "ee_target": 7, "ee_delta": 6}
_BISECTION_STEPS = 14


@dataclass(frozen=True)
class RobotState:
    """The reference a command is checked against: deltas start here, the step is measured from
    here (``FrankaArm``: the commanded joints; the bridge, for absolute rows: the arm's state)."""

    joint_pos: np.ndarray
    ee_pose: np.ndarray | None = None  # [7] x y z qw qx qy qz; computed by FK when absent
    gripper_width: float = 0.0


@dataclass(frozen=True)
class ArmAction:
    """A policy's command: ``values`` is read according to ``mode`` (see ACTION_WIDTH)."""

    mode: str
    values: np.ndarray
    gripper: float | None = None


@dataclass(frozen=True)
class SafeAction:
    """An accepted command, resolved to an absolute target the arm controller executes."""

    mode: str  # "joint_position" or "ee_target"
    target: np.ndarray  # [7]
    gripper: float | None
    source_mode: str
    adjustments: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return True


@dataclass(frozen=True)
class Rejection:
    """A refused command. Falsy, so ``if not (r := f.check(...))`` reads naturally."""

    reason: str
    detail: str

    def __bool__(self) -> bool:
        return False


class SafetyFilter:
    def __init__(self, limits: SafetyLimits | None = None, control_hz: float = 100.0):
        if not control_hz > 0:
            raise ValueError(f"control_hz must be positive, got {control_hz}")
        self.limits = limits or SafetyLimits.from_yaml()
        self.control_hz = float(control_hz)
        self.counters: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._joint_step = self.limits.joint_step_limit(self.control_hz)
        self._ee_step, self._rot_step = self.limits.ee_step_limit(self.control_hz)

    # ------------------------------------------------------------------ public
    def check(self, action: ArmAction, state: RobotState) -> SafeAction | Rejection:
        result = self._check(action, state)
        with self._lock:
            self.counters["checked"] += 1
            if isinstance(result, Rejection):
                self.counters["rejected"] += 1
                self.counters[f"rejected_{result.reason}"] += 1
            else:
                self.counters["accepted"] += 1
                for adj in result.adjustments:
                    self.counters[adj] += 1
        return result

    def check_target(self, q: np.ndarray, gripper: float | None = None) -> SafeAction | Rejection:
        """The absolute checks alone for a joint target whose step was already bounded (a delta
        chunk's row, resolved by ``safety.deltas``): finite, inside the joint limits, TCP inside the
        workspace box, gripper in range. No step scaling: the step is the plan's, not this tick's."""
        values = np.asarray(q, dtype=np.float64)
        result = self._check(ArmAction("joint_position", values, gripper), RobotState(joint_pos=values))
        with self._lock:
            self.counters["checked"] += 1
            key = "rejected" if isinstance(result, Rejection) else "accepted"
            self.counters[key] += 1
            if isinstance(result, Rejection):
                self.counters[f"rejected_{result.reason}"] += 1
        return result

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counters)

    def tcp_position(self, joint_pos: np.ndarray) -> np.ndarray:
        return model.tcp_position(joint_pos, self.limits.tcp_offset)

    def in_workspace(self, p: np.ndarray) -> bool:
        return bool(np.all(p >= self.limits.workspace_min) and np.all(p <= self.limits.workspace_max))

    # ----------------------------------------------------------------- checks
    def _check(self, action: ArmAction, state: RobotState) -> SafeAction | Rejection:
        width = ACTION_WIDTH.get(action.mode)
        if width is None:
            return Rejection("unknown_mode", f"mode {action.mode!r} not in {sorted(ACTION_WIDTH)}")
        values = np.asarray(action.values, dtype=np.float64)
        q = np.asarray(state.joint_pos, dtype=np.float64)
        if values.shape != (width,):
            return Rejection("shape", f"{action.mode} needs {width} values, got shape {values.shape}")
        if q.shape != (7,):
            return Rejection("shape", f"state joint_pos must have 7 values, got {q.shape}")
        if not (np.all(np.isfinite(values)) and np.all(np.isfinite(q))):
            return Rejection("non_finite", "NaN or inf in the command or the robot state")
        if action.gripper is not None and not np.isfinite(action.gripper):
            return Rejection("non_finite", "NaN or inf in the gripper command")
        adjustments: list[str] = []
        if action.mode in ("joint_position", "joint_delta"):
            result = self._joint(action.mode, values, q, adjustments)
            mode = "joint_position"
        else:
            ee = state.ee_pose
            if ee is None:
                ee = model.tcp_pose(q, self.limits.tcp_offset)
            ee = np.asarray(ee, dtype=np.float64)
            if ee.shape != (7,) or not np.all(np.isfinite(ee)):
                return Rejection("non_finite", "state ee_pose must be 7 finite numbers")
            result = self._cartesian(action.mode, values, ee, adjustments)
            mode = "ee_target"
        if isinstance(result, Rejection):
            return result
        gripper = self._gripper(action.gripper, adjustments)
        return SafeAction(mode, result, gripper, action.mode, tuple(adjustments))

    def _joint(self, mode: str, values: np.ndarray, q: np.ndarray, adj: list[str]) -> np.ndarray | Rejection:
        lim = self.limits
        target = values.copy() if mode == "joint_position" else q + values
        if np.any(target < lim.q_lo) or np.any(target > lim.q_hi):
            if mode == "joint_position":
                bad = np.flatnonzero((target < lim.q_lo) | (target > lim.q_hi)) + 1
                return Rejection("joint_limit", f"target outside joint limits on joint(s) {bad.tolist()}")
            target = np.clip(target, lim.q_lo, lim.q_hi)
            adj.append("clamped_joint_limit")
        if lim.on_workspace_violation.get(mode, "reject") == "reject":
            p = self.tcp_position(target)
            if not self.in_workspace(p):
                return Rejection(
                    "workspace", f"TCP of target at {np.round(p, 3).tolist()} is outside the box"
                )
        delta = target - q
        ratio = float(np.max(np.abs(delta) / self._joint_step))
        if ratio > 1.0:
            target = q + delta / ratio
            adj.append("scaled_step")
        if not self.in_workspace(self.tcp_position(target)):
            target = self._bisect_joint(q, target)
            if target is None:
                return Rejection(
                    "workspace", "the arm is outside the box and the command moves it further out"
                )
            adj.append("clamped_workspace")
        return target

    def _bisect_joint(self, q: np.ndarray, target: np.ndarray) -> np.ndarray | None:
        """Largest fraction of the move q -> target whose TCP stays in the box (q must be inside)."""
        if not self.in_workspace(self.tcp_position(q)):
            here = self.limits.box_violation(self.tcp_position(q))
            there = self.limits.box_violation(self.tcp_position(target))
            return target if there < here else None
        lo, hi = 0.0, 1.0
        for _ in range(_BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            if self.in_workspace(self.tcp_position(q + mid * (target - q))):
                lo = mid
            else:
                hi = mid
        return q + lo * (target - q)

    def _cartesian(
        self, mode: str, values: np.ndarray, ee: np.ndarray, adj: list[str]
    ) -> np.ndarray | Rejection:
        pos, quat = ee[:3], ee[3:] / np.linalg.norm(ee[3:])
        if mode == "ee_target":
            norm = float(np.linalg.norm(values[3:]))
            if abs(norm - 1.0) > 1e-3:
                return Rejection("bad_quaternion", f"target quaternion norm is {norm:.4f}, expected 1")
            t_pos, t_quat = values[:3].copy(), values[3:] / norm
        else:
            t_pos = pos + values[:3]
            t_quat = quat_multiply(quat_from_rotvec(values[3:]), quat)
        policy = self.limits.on_workspace_violation.get(mode, "reject")
        if policy == "reject" and not self.in_workspace(t_pos):
            return Rejection("workspace", f"TCP target {np.round(t_pos, 3).tolist()} is outside the box")
        step = t_pos - pos
        dist = float(np.linalg.norm(step))
        if dist > self._ee_step:
            t_pos = pos + step * (self._ee_step / dist)
            adj.append("scaled_step")
        angle = quat_angle(quat, t_quat)
        if angle > self._rot_step:
            rel = quat_to_rotvec(quat_multiply(t_quat, quat_conjugate(quat)))
            t_quat = quat_multiply(quat_from_rotvec(rel * (self._rot_step / angle)), quat)
            adj.append("scaled_rotation")
        if not self.in_workspace(t_pos):
            clipped = np.clip(t_pos, self.limits.workspace_min, self.limits.workspace_max)
            box = self.limits.box_violation
            if not self.in_workspace(pos) and box(t_pos) >= box(pos):
                return Rejection(
                    "workspace", "the TCP is outside the box and the command moves it further out"
                )
            t_pos = clipped if self.in_workspace(pos) else t_pos
            adj.append("clamped_workspace")
        return np.concatenate([t_pos, t_quat])

    def _gripper(self, width: float | None, adj: list[str]) -> float | None:
        if width is None:
            return None
        lo, hi = self.limits.gripper_width_min, self.limits.gripper_width_max
        if not lo <= width <= hi:
            adj.append("clamped_gripper")
            return float(min(max(width, lo), hi))
        return float(width)
