"""``FrankaConfig``: every knob of the Franka arm driver, validated once at the edge.

The same names are the ``franka_node`` ROS parameters in ``launch/config/*.yaml``, so a typo or an
out-of-range value there fails at start-up with a ``ConfigError`` naming the key and its range.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.model import HOME_Q
from rlinf_robot.safety.limits import DEFAULT_LIMITS_FILE, SafetyLimits
from rlinf_robot.settings import check, flag, integer, number, numbers, text


@dataclass(frozen=True)
class FrankaConfig:
    robot_ip: str = text("172.16.0.2")
    #: Rate of the state stream and of command updates to franky (Hz).
    control_rate_hz: float = number(200.0, 10.0, 1000.0)
    #: How far (in time at the safety filter's speed limits) a goal may lead the commanded position.
    #: Goals are re-checked every tick with the step the filter allows in this time: a streamed
    #: target up to one policy step ahead (20 mm / 65 mrad at the packaged limits) reaches franky's
    #: planner whole, which shapes the motion with its own limits; a farther one is approached with
    #: this lead. At one control tick (5 ms) franky had to be able to stop within 2.5 mm of every
    #: target, which throttled a 20 Hz policy's 10 mm steps to ~1.5 mm each.
    goal_lead_s: float = number(0.05, 0.001, 1.0)
    #: Safety limits YAML; empty = the packaged FR3 limits.
    limits_file: str = text("")
    #: Scales franky's velocity/acceleration/jerk limits for every motion (0, 1].
    relative_dynamics_factor: float = number(0.2, 0.0, 1.0, lo_open=True)
    #: A command older than this (by its stamp) is never executed; without fresh commands the arm holds.
    deadman_ms: float = number(200.0, 1.0, 10_000.0)
    #: Enforce a real-time kernel (franky ``RealtimeConfig.Enforce``); off for simulators.
    realtime: bool = flag(False)
    #: SCHED_FIFO priority of the control loop thread (0 = normal scheduling). It sleeps most of
    #: each period; a real-time slot keeps the state stream at rate on a loaded machine. franky's
    #: own 1 kHz thread runs at 99.
    loop_priority: int = integer(0, 0, 98)
    #: Nice value of the control loop thread where SCHED_FIFO is not permitted (a CPU-capped CI job
    #: has no real-time budget) or ``loop_priority`` is 0. franky's motion threads are created from
    #: it and inherit it: starved, franky's generator catches up on lost cycles in jumps (the
    #: runaway guard's case). 0 leaves it; below 0 needs ``CAP_SYS_NICE`` or an ``RLIMIT_NICE``.
    loop_nice: int = integer(-10, -20, 19)
    gripper: bool = flag(True)
    gripper_speed: float = number(0.1, 0.0, 0.2, lo_open=True)
    gripper_force: float = number(20.0, 0.0, 140.0, lo_open=True)
    home_q: tuple[float, ...] = numbers(tuple(HOME_Q.tolist()), 7)
    home_tolerance: float = number(1e-3, 1e-5, 0.1)
    #: Recover automatically from reflexes (``recover_from_errors``); else wait for ``recover``.
    auto_recover: bool = flag(True)
    rehome_on_recover: bool = flag(False)
    #: This many faults (reflexes or failed recoveries) within ``fault_window_s`` latch the arm.
    max_faults: int = integer(3, 1)
    fault_window_s: float = number(30.0, 0.1, 3600.0)
    #: ``connect`` retries this long (the robot or franka-sim may still be booting).
    connect_timeout_s: float = number(10.0, 0.0, 600.0)
    reconnect_period_s: float = number(0.5, 0.05, 60.0)
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        check(self, "franka config")
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
