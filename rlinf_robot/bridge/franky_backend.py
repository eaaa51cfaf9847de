"""``FrankyBackend``: the bridge server driving an FR3 directly with franky (no ROS).

For a robot PC that does not run ROS, and as the bridge's real-arm integration test against
franka-sim (which speaks the real libfranka protocol). Every target is a franky asynchronous
``JointMotion`` that replaces the previous one, so a new chunk step takes over smoothly; Cartesian
targets are resolved to joints with our FK/IK (one control signal type, one TCP definition).
``hold`` is a motion, with a higher dynamics factor, to where the running one can stop without
reversing (``rlinf_robot.robot.franka.braking``): a smooth stop, not a brake. ``stop`` preempts the control loop at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import numpy as np

from rlinf_robot.errors import MissingDependency, ReflexError
from rlinf_robot.protocol import Observation
from rlinf_robot.robot.franka.braking import franky_braking_target
from rlinf_robot.robot.franka.model import HOME_Q, solve_ik, tcp_pose
from rlinf_robot.robot.sched import keep_scheduling
from rlinf_robot.safety import RobotState, SafeAction, SafetyLimits


class FrankyBackend:
    def __init__(
        self,
        host: str = "127.0.0.1",
        dynamics_factor: float = 0.2,
        hold_dynamics_factor: float = 0.6,
        home_q: np.ndarray | None = None,
        limits: SafetyLimits | None = None,
        instruction: str = "",
        home_timeout_s: float = 30.0,
    ):
        try:
            from franky import JointMotion, RealtimeConfig, Robot
        except ImportError as e:
            raise MissingDependency("franky-control", extra="robot") from e
        self._JointMotion = JointMotion
        with keep_scheduling():  # libfranka makes the connecting thread SCHED_FIFO 99 otherwise
            self.robot = Robot(host, realtime_config=RealtimeConfig.Ignore)
        self.robot.relative_dynamics_factor = 1.0  # per-motion factors below scale it
        self.dynamics_factor = float(dynamics_factor)
        self.hold_dynamics_factor = float(hold_dynamics_factor)
        self.home_q = np.array(HOME_Q if home_q is None else home_q, dtype=np.float64)
        self.limits = limits or SafetyLimits.from_yaml()
        self.instruction = instruction
        self.home_timeout_s = home_timeout_s
        self._lock = threading.Lock()
        self._fault: str | None = None

    # -- reading
    def _read(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            s = self.robot.state  # fresh: the control loop's newest sample, or a read when idle
        return np.array(s.q, dtype=np.float64), np.array(s.dq, dtype=np.float64)

    def state(self) -> RobotState | None:
        try:
            q, _ = self._read()
        except Exception:
            return None
        return RobotState(joint_pos=q, ee_pose=tcp_pose(q, self.limits.tcp_offset))

    def observe(self) -> Observation | None:
        try:
            q, dq = self._read()
        except Exception:
            return None
        return Observation(
            seq=0,
            stamp_ns=time.monotonic_ns(),
            joint_pos=q,
            joint_vel=dq,
            ee_pose=tcp_pose(q, self.limits.tcp_offset),
            instruction=self.instruction,
            hops={"obs_captured": time.time_ns()},
        )

    # -- moving
    def _move(self, q: np.ndarray, factor: float) -> None:
        motion = self._JointMotion(
            [float(x) for x in q], relative_dynamics_factor=factor, return_when_finished=False
        )
        with self._lock:
            try:
                self.robot.move(motion, asynchronous=True)
            except Exception as e:  # an error of the previous motion surfaces here
                if self.robot.has_errors:
                    self._fault = "REFLEX"
                    raise ReflexError(str(e)) from e
                self.robot.move(motion, asynchronous=True)  # e.g. "preempted" after our own stop

    def apply(self, action: SafeAction) -> None:
        if action.mode == "joint_position":
            target = action.target
        else:
            q, _ = self._read()
            target = solve_ik(action.target, q, self.limits.tcp_offset, self.limits.q_lo, self.limits.q_hi).q
        self._move(target, self.dynamics_factor)

    def hold(self) -> None:
        """Brake where the running motion can stop under the hold dynamics, never reversing."""
        with self._lock:
            target = franky_braking_target(
                self.robot, self.hold_dynamics_factor, self.limits.q_lo, self.limits.q_hi
            )
        self._move(target, self.hold_dynamics_factor)

    def stop(self) -> None:
        with self._lock:
            self.robot.stop()

    def run_command(self, name: str, args: Mapping[str, object]) -> str:
        if name in ("recover", "reset"):
            with self._lock:
                self.robot.recover_from_errors()
            self._fault = None
            return f"{name}: errors cleared"
        if name != "home":
            raise ValueError(f"unknown command {name!r}")
        self._move(self.home_q, self.dynamics_factor)
        deadline = time.monotonic() + self.home_timeout_s
        while True:
            with self._lock:
                moving = self.robot.poll_motion()
            q, dq = self._read()
            if not moving and np.max(np.abs(q - self.home_q)) < 5e-3:
                return "home reached"
            if not moving and np.max(np.abs(dq)) < 1e-3:
                raise RuntimeError(f"home interrupted {np.max(np.abs(q - self.home_q)):.3f} rad away")
            if time.monotonic() > deadline:
                raise TimeoutError(f"home not reached within {self.home_timeout_s} s")
            time.sleep(0.01)

    def fault_state(self) -> str | None:
        return self._fault
