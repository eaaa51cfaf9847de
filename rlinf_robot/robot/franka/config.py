"""``FrankaConfig``: every knob of the Franka arm driver, validated once at the edge.

The same names are the ``franka_node`` ROS parameters in ``launch/config/*.yaml``, so a typo or an
out-of-range value there fails at start-up with a ``ConfigError`` naming the key and its range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.model import HOME_Q
from rlinf_robot.safety.limits import DEFAULT_LIMITS_FILE, SafetyLimits


def _range(lo: float, hi: float, lo_open: bool = False):
    def check(key: str, v: Any) -> None:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        ok = ok and (v > lo if lo_open else v >= lo) and v <= hi
        if not ok:
            bracket = "(" if lo_open else "["
            raise ConfigError(f"franka config: {key} must be a number in {bracket}{lo}, {hi}], got {v!r}")

    return check


def _positive_int(key: str, v: Any) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ConfigError(f"franka config: {key} must be an integer >= 1, got {v!r}")


def _int_range(lo: int, hi: int):
    def check(key: str, v: Any) -> None:
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise ConfigError(f"franka config: {key} must be an integer in [{lo}, {hi}], got {v!r}")

    return check


def _string(key: str, v: Any) -> None:
    if not isinstance(v, str):
        raise ConfigError(f"franka config: {key} must be a string, got {v!r}")


def _boolean(key: str, v: Any) -> None:
    if not isinstance(v, bool):
        raise ConfigError(f"franka config: {key} must be true or false, got {v!r}")


def _home(key: str, v: Any) -> None:
    if len(v) != 7 or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in v):
        raise ConfigError(f"franka config: {key} must be 7 finite joint angles (rad), got {v!r}")


#: key -> validator; the allowed range is part of the error message.
VALIDATORS = {
    "robot_ip": _string,
    "control_rate_hz": _range(10.0, 1000.0),
    "goal_lead_s": _range(0.001, 1.0),
    "limits_file": _string,
    "relative_dynamics_factor": _range(0.0, 1.0, lo_open=True),
    "deadman_ms": _range(1.0, 10_000.0),
    "realtime": _boolean,
    "loop_priority": _int_range(0, 98),
    "gripper": _boolean,
    "gripper_speed": _range(0.0, 0.2, lo_open=True),
    "gripper_force": _range(0.0, 140.0, lo_open=True),
    "home_q": _home,
    "home_tolerance": _range(1e-5, 0.1),
    "auto_recover": _boolean,
    "rehome_on_recover": _boolean,
    "max_faults": _positive_int,
    "fault_window_s": _range(0.1, 3600.0),
    "connect_timeout_s": _range(0.0, 600.0),
    "reconnect_period_s": _range(0.05, 60.0),
}


@dataclass(frozen=True)
class FrankaConfig:
    robot_ip: str = "172.16.0.2"
    #: Rate of the state stream and of command updates to franky (Hz).
    control_rate_hz: float = 200.0
    #: How far (in time at the safety filter's speed limits) a goal may lead the commanded position.
    #: Goals are re-checked every tick with the step the filter allows in this time: a streamed
    #: target up to one policy step ahead (20 mm / 65 mrad at the packaged limits) reaches franky's
    #: planner whole, which shapes the motion with its own limits; a farther one is approached with
    #: this lead. At one control tick (5 ms) franky had to be able to stop within 2.5 mm of every
    #: target, which throttled a 20 Hz policy's 10 mm steps to ~1.5 mm each.
    goal_lead_s: float = 0.05
    #: Safety limits YAML; empty = the packaged FR3 limits.
    limits_file: str = ""
    #: Scales franky's velocity/acceleration/jerk limits for every motion (0, 1].
    relative_dynamics_factor: float = 0.2
    #: A command older than this (by its stamp) is never executed; without fresh commands the arm holds.
    deadman_ms: float = 200.0
    #: Enforce a real-time kernel (franky ``RealtimeConfig.Enforce``); off for simulators.
    realtime: bool = False
    #: SCHED_FIFO priority of the control loop thread (0 = normal scheduling). It sleeps most of
    #: each period; a real-time slot keeps the state stream at rate on a loaded machine. franky's
    #: own 1 kHz thread runs at 99.
    loop_priority: int = 0
    gripper: bool = True
    gripper_speed: float = 0.1
    gripper_force: float = 20.0
    home_q: tuple[float, ...] = tuple(HOME_Q.tolist())
    home_tolerance: float = 1e-3
    #: Recover automatically from reflexes (``recover_from_errors``); else wait for ``recover``.
    auto_recover: bool = True
    rehome_on_recover: bool = False
    #: This many faults (reflexes or failed recoveries) within ``fault_window_s`` latch the arm.
    max_faults: int = 3
    fault_window_s: float = 30.0
    #: ``connect`` retries this long (the robot or franka-sim may still be booting).
    connect_timeout_s: float = 10.0
    reconnect_period_s: float = 0.5
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for key, check in VALIDATORS.items():
            check(key, getattr(self, key))
        object.__setattr__(self, "home_q", tuple(float(x) for x in self.home_q))

    @classmethod
    def from_params(cls, params: dict[str, Any], strict: bool = True) -> FrankaConfig:
        """Build from a ROS parameter dict; unknown keys are an error when ``strict``."""
        known = {f.name for f in fields(cls)} - {"extra"}
        unknown = sorted(set(params) - known)
        if unknown and strict:
            raise ConfigError(f"franka config: unknown key(s) {unknown}; known: {sorted(known)}")
        values = {k: v for k, v in params.items() if k in known}
        for key in (
            "control_rate_hz",
            "goal_lead_s",
            "relative_dynamics_factor",
            "deadman_ms",
            "gripper_speed",
            "gripper_force",
            "home_tolerance",
            "fault_window_s",
            "connect_timeout_s",
            "reconnect_period_s",
        ):
            if isinstance(values.get(key), int) and not isinstance(values.get(key), bool):
                values[key] = float(values[key])
        return cls(**values, extra={k: params[k] for k in unknown})

    def limits(self) -> SafetyLimits:
        path = Path(self.limits_file) if self.limits_file else DEFAULT_LIMITS_FILE
        if not path.exists():
            raise ConfigError(f"franka config: limits_file {str(path)!r} does not exist")
        return SafetyLimits.from_yaml(path)
