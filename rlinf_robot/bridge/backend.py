"""What the bridge server needs from "the arm": a small interface, so the server stands alone.

``ArmBackend`` is implemented by ``StreamBackend``, which ``bridge_node`` feeds from the topics of
``franka_node`` and ``DirectBackend`` feeds from the same arm driver (``FrankaArm``) in-process
without ROS, and by ``KinematicArm`` (an in-memory arm for tests and benchmarks of the bridge
itself).

The server calls ``state``/``observe``/``apply``/``hold``/``stop`` from its I/O thread (they must
return quickly) and ``run_command`` from a worker thread (it may block while the arm homes).
Everything passed to ``apply`` has already been through the ``SafetyFilter``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from rlinf_robot.protocol import Observation
from rlinf_robot.robot.franka.model import HOME_Q, solve_ik, tcp_pose
from rlinf_robot.safety import RobotState, SafeAction

#: Commands the server forwards to the backend (the others are the bridge's own business).
BACKEND_COMMANDS = ("home", "reset", "recover")


@runtime_checkable
class ArmBackend(Protocol):
    def state(self) -> RobotState | None:
        """The arm's current state for the safety filter, or None when it is unknown or stale
        (then nothing is applied)."""

    def observe(self) -> Observation | None:
        """The newest observation (``seq`` is assigned by the server), or None if not ready.
        ``stamp_ns`` is the capture time on this machine's monotonic clock."""

    def apply(self, action: SafeAction) -> None:
        """Send one absolute, already-checked target to the arm."""

    def hold(self) -> None:
        """Smooth, non-latching stop (deadman, lease loss, a step refused or without arm state):
        brake to where the running motion can come to rest without reversing
        (``rlinf_robot.robot.franka.braking``), never back to the measured joints, which lie behind
        a moving arm. The next ``apply`` moves the arm again. Starts the brake and returns; it does
        not wait for the arm to stop."""

    def stop(self) -> None:
        """E-stop: halt now. The server latches and refuses motion until ``reset``."""

    def run_command(self, name: str, args: Mapping[str, object]) -> str:
        """Blocking ``home``/``reset``/``recover``; returns a short message, raises on failure.
        Returns only once ``fault_state`` tells the state the command left the arm in: the bridge
        replies right then, and the learner's next chunk meets that state."""

    def fault_state(self) -> str | None:
        """``REFLEX``/``RECOVERING``/``LATCHED``/``ESTOP`` while the arm controller is in such a
        state (it takes no commands), else None."""


class KinematicArm:
    """An in-memory FR3 that reaches every target instantly and records what it was told.

    For exercising the bridge without a controller (unit tests, latency benchmarks): the ZMQ path,
    the lease, the deadman and the scheduler are real; only the physics is skipped. ``log`` holds
    ``(monotonic_ns, kind, payload)`` for every apply / hold / stop.
    """

    def __init__(
        self, q0: np.ndarray | None = None, images: dict[str, np.ndarray] | None = None, instruction: str = ""
    ):
        self._lock = threading.Lock()
        self._q = np.array(HOME_Q if q0 is None else q0, dtype=np.float64)
        self._qd = np.zeros(7)
        self._gripper = 0.04
        self._pose: np.ndarray | None = None  # FK of _q, computed when observed after a move
        self.images = dict(images or {})
        self.instruction = instruction
        self.stale: list[str] = []
        self.log: list[tuple[int, str, object]] = []
        self._cond = threading.Condition(self._lock)
        self.fault: str | None = None

    # -- ArmBackend
    def state(self) -> RobotState | None:
        with self._lock:
            return RobotState(joint_pos=self._q.copy(), gripper_width=self._gripper)

    def observe(self) -> Observation | None:
        with self._lock:
            if self._pose is None:
                self._pose = tcp_pose(self._q)
            q, qd, g, pose = self._q.copy(), self._qd.copy(), self._gripper, self._pose
        now = time.monotonic_ns()
        return Observation(
            seq=0,
            stamp_ns=now,
            joint_pos=q,
            joint_vel=qd,
            ee_pose=pose,
            gripper_width=g,
            images=self.images,
            instruction=self.instruction,
            stale=list(self.stale),
            hops={"obs_captured": time.time_ns()},
        )

    def apply(self, action: SafeAction) -> None:
        with self._lock:
            if action.mode == "joint_position":
                self._q = np.array(action.target, dtype=np.float64)
            else:
                self._q = solve_ik(action.target, self._q).q
            self._pose = None
            if action.gripper is not None:
                self._gripper = float(action.gripper)
            self._record("apply", action)

    def hold(self) -> None:
        with self._lock:
            self._record("hold", self._q.copy())

    def stop(self) -> None:
        with self._lock:
            self._record("stop", None)

    def run_command(self, name: str, args: Mapping[str, object]) -> str:
        with self._lock:
            if name == "home":
                self._q = HOME_Q.copy()
                self._pose = None
            self._record(name, dict(args))
        return f"{name} done"

    def fault_state(self) -> str | None:
        return self.fault

    # -- test helpers
    def _record(self, kind: str, payload: object) -> None:
        self.log.append((time.monotonic_ns(), kind, payload))
        self._cond.notify_all()

    def entries(self, kind: str) -> list[tuple[int, object]]:
        with self._lock:
            return [(t, p) for t, k, p in self.log if k == kind]

    def wait_for(self, kind: str, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until ``count`` entries of ``kind`` were logged (False on timeout)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while sum(1 for _, k, _ in self.log if k == kind) < count:
                left = deadline - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    return sum(1 for _, k, _ in self.log if k == kind) >= count
            return True
