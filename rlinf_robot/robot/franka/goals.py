"""From a command to the next joint target: freshness, the safety filter, and IK for EE targets.

A *goal* is the latest accepted command. Absolute goals (``joint_position``, ``ee_target``) are
re-checked every control tick against the arm's commanded position, so the safety filter's
per-tick step limit turns one far target into a smooth approach; deltas are resolved once, when
they arrive, into the absolute target they mean: added to the commanded position (``q_d``, where
franky's motion generator is), not to the measured one, as ``safety.deltas`` anchors the bridge's
delta chunks at the last commanded target. A goal stops being executed the moment it is older than
the deadman or older than the last e-stop.

A resolved delta is *one-shot*: the filter bounded it to one step when it arrived, so once its
target is handed to the arm the goal ends and the arm finishes that step on its own. The deadman
exists for targets the arm would chase across the workspace; cutting a one-step motion short
only made the result depend on how busy the machine was (a 4 mm EE delta stopped 1.7 mm short
when franka-sim ran slower than real time).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from rlinf_robot.robot.franka.model import FINGER_JOINT_NAME, JOINT_NAMES, solve_ik
from rlinf_robot.safety import ArmAction, Rejection, RobotState, SafeAction, SafetyFilter

ABSOLUTE_MODES = ("joint_position", "ee_target")
#: IK must land the TCP this close to the filtered target, else the command is refused (m, rad).
IK_TOLERANCE = (2e-4, 2e-3)


@dataclass
class Goal:
    action: ArmAction
    stamp: float  # monotonic time the command was issued (its header stamp, mapped to our clock)
    wall_stamp: float  # the same instant in wall-clock seconds, for the command->applied latency
    generation: int  # e-stop generation when it arrived
    expires: bool = True  # False for internal goals (homing), which the deadman does not cover
    source: str = "command"
    one_shot: bool = False  # a resolved delta: ends once its (unscaled) target reaches the arm
    applied: bool = field(default=False)
    #: The joint target once the filter passed the goal unscaled: later ticks only hold it.
    final: np.ndarray | None = field(default=None)
    #: Homing around the workspace box (``safety.homing``): the joint waypoints after this
    #: goal's target, the last one home. The tracker moves on to the next once the motion is there.
    via: list[np.ndarray] = field(default_factory=list)


class GoalSlot:
    """The one goal the control loop tracks.

    Whoever takes a goal away (a newer command replacing it, a hold, a stop, a reflex, the loop
    when the goal is done or stale) ends it exactly once, with the reason. A ``home()`` caller
    waits on that (``wait_home``) and learns at once how its homing ended: a stop, a hold or a
    reflex while homing must not leave the home service waiting out its timeout.
    """

    def __init__(self, counters: Counter[str]):
        self._lock = threading.Lock()
        self._goal: Goal | None = None
        self._counters = counters
        self._home_done = threading.Event()
        self.home_outcome = ""  # how the last home goal ended ("homed" when it got there)

    @property
    def goal(self) -> Goal | None:
        with self._lock:
            return self._goal

    def homing(self) -> bool:
        goal = self.goal
        return goal is not None and goal.source == "home"

    def put(self, goal: Goal) -> None:
        """Make ``goal`` the one tracked (it replaces the previous one)."""
        with self._lock:
            self._goal = goal

    def drop(self, goal: Goal, why: str, outcome: str | None = None) -> None:
        """The loop ends ``goal`` (counted as ``why``) unless someone already took it away: each
        goal ends once, told by whoever removed it (``outcome``, else ``why``)."""
        with self._lock:
            if self._goal is not goal:
                return
            self._goal = None
        self._counters[why] += 1
        self._ended(goal, outcome or why)

    def clear(self, why: str = "cleared") -> None:
        """Take the goal away, whatever it is (hold, stop, reflex, lost link, reset)."""
        with self._lock:
            goal, self._goal = self._goal, None
        if goal is not None:
            self._ended(goal, why)

    def expect_home(self) -> None:
        """Arm ``wait_home`` for a home goal about to be put."""
        self._home_done.clear()

    def wait_home(self, timeout_s: float) -> bool:
        """Whether the home goal ended (how: ``home_outcome``) within ``timeout_s``."""
        return self._home_done.wait(timeout_s)

    def _ended(self, goal: Goal, why: str) -> None:
        if goal.source == "home":
            self.home_outcome = why
            self._home_done.set()


def joint_targets_by_name(
    names: list[str], positions: list[float], current: np.ndarray
) -> tuple[np.ndarray, float | None] | Rejection:
    """Absolute arm targets (7) and an optional gripper width from a name -> position command.

    Joints the command does not name keep ``current``; the finger joint is half the opening, as in
    the published joint states. Unknown names, duplicates and length mismatches are refused.
    """
    if len(names) != len(positions):
        return Rejection("shape", f"{len(names)} names but {len(positions)} positions")
    if len(set(names)) != len(names):
        return Rejection("shape", "duplicate joint names")
    target = np.array(current, dtype=np.float64)
    gripper = None
    for name, value in zip(names, positions, strict=True):
        if name in JOINT_NAMES:
            target[JOINT_NAMES.index(name)] = value
        elif name == FINGER_JOINT_NAME:
            gripper = 2.0 * float(value)
        else:
            return Rejection(
                "unknown_joint", f"unknown joint {name!r}; known: {[*JOINT_NAMES, FINGER_JOINT_NAME]}"
            )
    if not any(n in JOINT_NAMES for n in names) and gripper is None:
        return Rejection("shape", "the command names no joint")
    return target, gripper


class GoalResolver:
    """The safety filter plus IK: every target the arm executes comes out of ``resolve``."""

    def __init__(self, safety: SafetyFilter):
        self.safety = safety
        self.limits = safety.limits

    def check(self, action: ArmAction, q_base: np.ndarray, gripper_width: float) -> SafeAction | Rejection:
        state = RobotState(joint_pos=q_base, ee_pose=None, gripper_width=gripper_width)
        return self.safety.check(action, state)

    def joint_target(self, safe: SafeAction, q_base: np.ndarray) -> np.ndarray | Rejection:
        """The joint target for a filtered action: as is, or by IK for an EE target."""
        if safe.mode == "joint_position":
            return safe.target
        ik = solve_ik(safe.target, q_base, self.limits.tcp_offset)
        if not ik.converged and (ik.position_error > IK_TOLERANCE[0] or ik.rotation_error > IK_TOLERANCE[1]):
            return Rejection(
                "ik_failed", f"no joint solution within {IK_TOLERANCE} (err {ik.position_error:.2e} m)"
            )
        if np.any(ik.q < self.limits.q_lo) or np.any(ik.q > self.limits.q_hi):
            bad = np.flatnonzero((ik.q < self.limits.q_lo) | (ik.q > self.limits.q_hi)) + 1
            return Rejection(
                "joint_limit", f"the EE target needs joint(s) {bad.tolist()} beyond their limits"
            )
        return ik.q

    def resolve(
        self, goal: Goal, q_base: np.ndarray, gripper_width: float
    ) -> tuple[np.ndarray, SafeAction] | Rejection:
        safe = self.check(goal.action, q_base, gripper_width)
        if isinstance(safe, Rejection):
            return safe
        target = self.joint_target(safe, q_base)
        if isinstance(target, Rejection):
            return target
        return target, safe
