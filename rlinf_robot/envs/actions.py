"""The action spec every simulator declares: the real arm's per-tick limits, nothing looser.

Bounds come from the safety limits the franka node enforces (``SafetyLimits.joint_step_limit`` /
``ee_step_limit`` at the control rate), so an action a policy learns in any simulator is one the
arm accepts unchanged. Adapters translate these physical units (rad, m, rad as rotation vector,
finger opening in m) into their simulator's own normalized actions.
"""

from __future__ import annotations

import numpy as np

from rlinf_robot.envs.spec import ACTION_MODES, ActionSpec
from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.model import GRIPPER_MAX_WIDTH
from rlinf_robot.safety.limits import SafetyLimits


def safe_action_spec(
    mode: str, gripper: bool, control_hz: float, limits: SafetyLimits | None = None
) -> ActionSpec:
    if mode not in ACTION_MODES:
        raise ConfigError(f"action_mode {mode!r} not in {sorted(ACTION_MODES)}")
    limits = limits or SafetyLimits.from_yaml()
    if mode == "joint_delta":
        high = np.asarray(limits.joint_step_limit(control_hz), np.float32)
    else:
        ee, rot = limits.ee_step_limit(control_hz)
        high = np.array([ee] * 3 + [rot] * 3, np.float32)
    low = -high
    if gripper:
        low = np.append(low, np.float32(0.0))
        high = np.append(high, np.float32(GRIPPER_MAX_WIDTH))
    width = ACTION_MODES[mode] + int(gripper)
    return ActionSpec(
        mode, (width,), low.astype(np.float32), high.astype(np.float32), float(control_hz), gripper
    )


def check_actions(actions, spec: ActionSpec, num_envs: int) -> np.ndarray:
    """float32 [N, A] or ValueError (wrong shape, NaN/inf) before anything moves."""
    a = np.asarray(actions, dtype=np.float32)
    want = (num_envs, *spec.shape)
    if a.shape != want:
        raise ValueError(f"actions must have shape {want}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("actions contain NaN or inf; nothing was applied")
    return a
