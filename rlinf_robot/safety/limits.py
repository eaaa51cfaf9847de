"""Safety limits: a typed, validated view of ``conf/robot/fr3_limits.yaml``.

What describes the arm rather than a limit (joint names, the TCP offset, the hand's widest opening)
defaults to the FR3 model (``rlinf_robot.robot.franka.model``); the YAML may override it for another
tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import yaml

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.model import GRIPPER_MAX_WIDTH, JOINT_NAMES, TCP_OFFSET

DEFAULT_LIMITS_FILE = Path(__file__).resolve().parent.parent / "conf" / "robot" / "fr3_limits.yaml"
VIOLATION_POLICIES = ("reject", "clamp")
_VECTOR_FIELDS = {
    "joint_position_min": 7,
    "joint_position_max": 7,
    "joint_velocity_max": 7,
    "workspace_min": 3,
    "workspace_max": 3,
}


@dataclass(frozen=True)
class SafetyLimits:
    joint_position_min: np.ndarray
    joint_position_max: np.ndarray
    joint_velocity_max: np.ndarray
    workspace_min: np.ndarray
    workspace_max: np.ndarray
    joint_names: tuple[str, ...] = JOINT_NAMES
    joint_position_margin: float = 0.05
    velocity_scale: float = 0.5
    max_joint_step: float = 0.05
    tcp_offset: float = TCP_OFFSET
    max_ee_speed: float = 0.5
    max_ee_step: float = 0.02
    max_ee_angular_speed: float = 1.5
    max_ee_rot_step: float = 0.1
    max_target_lead: float = 0.05
    gripper_width_min: float = 0.0
    gripper_width_max: float = GRIPPER_MAX_WIDTH
    on_workspace_violation: dict[str, str] = field(
        default_factory=lambda: {
            "joint_position": "reject",
            "ee_target": "reject",
            "joint_delta": "clamp",
            "ee_delta": "clamp",
        }
    )
    robot: str = "fr3"

    @classmethod
    def from_yaml(cls, path: str | Path = DEFAULT_LIMITS_FILE) -> SafetyLimits:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
        return cls.from_dict(raw, source=str(path))

    @classmethod
    def from_dict(cls, raw: dict, source: str = "<dict>") -> SafetyLimits:
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
        values = dict(raw)
        for key, n in _VECTOR_FIELDS.items():
            if key not in values:
                raise ConfigError(f"{source}: missing key {key!r}")
            arr = np.asarray(values[key], dtype=np.float64)
            if arr.shape != (n,) or not np.all(np.isfinite(arr)):
                raise ConfigError(f"{source}: {key} must be {n} finite numbers, got {values[key]!r}")
            values[key] = arr
        values["joint_names"] = tuple(values.get("joint_names", JOINT_NAMES))
        limits = cls(**values)
        limits.validate(source)
        return limits

    def validate(self, source: str = "<limits>") -> None:
        if np.any(self.joint_position_min + 2 * self.joint_position_margin >= self.joint_position_max):
            raise ConfigError(f"{source}: joint_position_min must be below joint_position_max (with margins)")
        if np.any(self.workspace_min >= self.workspace_max):
            raise ConfigError(f"{source}: workspace_min must be below workspace_max on every axis")
        if np.any(self.joint_velocity_max <= 0):
            raise ConfigError(f"{source}: joint_velocity_max must be positive")
        for key in ("velocity_scale",):
            v = getattr(self, key)
            if not 0.0 < v <= 1.0:
                raise ConfigError(f"{source}: {key} must be in (0, 1], got {v}")
        for key in (
            "max_joint_step",
            "max_ee_speed",
            "max_ee_step",
            "max_ee_angular_speed",
            "max_ee_rot_step",
            "max_target_lead",
        ):
            v = getattr(self, key)
            if not v > 0:
                raise ConfigError(f"{source}: {key} must be positive, got {v}")
        if not 0.0 <= self.gripper_width_min < self.gripper_width_max:
            raise ConfigError(f"{source}: need 0 <= gripper_width_min < gripper_width_max")
        for mode, policy in self.on_workspace_violation.items():
            if policy not in VIOLATION_POLICIES:
                raise ConfigError(
                    f"{source}: on_workspace_violation.{mode} must be one of {VIOLATION_POLICIES}, got {policy!r}"
                )

    @property
    def q_lo(self) -> np.ndarray:
        """Lowest joint target the filter lets through (datasheet minimum plus the margin)."""
        return self.joint_position_min + self.joint_position_margin

    @property
    def q_hi(self) -> np.ndarray:
        return self.joint_position_max - self.joint_position_margin

    def joint_step_limit(self, control_hz: float) -> np.ndarray:
        """Largest joint change per tick: the velocity budget per tick, capped by ``max_joint_step``."""
        return np.minimum(self.joint_velocity_max * self.velocity_scale / control_hz, self.max_joint_step)

    def ee_step_limit(self, control_hz: float) -> tuple[float, float]:
        """Largest (translation m, rotation rad) TCP change per tick."""
        return (
            min(self.max_ee_speed / control_hz, self.max_ee_step),
            min(self.max_ee_angular_speed / control_hz, self.max_ee_rot_step),
        )

    def box_violation(self, p: np.ndarray, margin: float = 0.0) -> float:
        """How far (m) the TCP position ``p`` is outside the workspace box shrunk by ``margin``
        (0 inside): what the filter and the homing planner compare to tell "back towards the box"
        from "further out"."""
        below = np.maximum(self.workspace_min + margin - p, 0.0)
        above = np.maximum(p - (self.workspace_max - margin), 0.0)
        return float(np.linalg.norm(below + above))
