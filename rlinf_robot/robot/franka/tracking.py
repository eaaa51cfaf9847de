"""``GoalTracker``: how the Franka driver follows its goal, one control tick at a time.

Each tick the current goal is re-checked by the safety filter against the commanded position and
handed to franky as an asynchronous joint motion; a stale goal brakes, a refused one is dropped, a
delta ends once its target is handed over, a home goal ends once the arm is home. Without a goal
the tracker keeps the running brake from being overrun. Every way a goal ends goes through the
``GoalSlot``, so a ``home()`` caller hears at once how its homing ended.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

import numpy as np

from rlinf_robot.errors import ReflexError
from rlinf_robot.robot.franka.faults import ArmState, FaultStateMachine
from rlinf_robot.robot.franka.goals import GoalResolver, GoalSlot
from rlinf_robot.robot.franka.gripper import GripperWorker
from rlinf_robot.robot.franka.link import ArmReading
from rlinf_robot.robot.franka.recovery import FaultHandler
from rlinf_robot.robot.franka.servo import Servo
from rlinf_robot.robot.timing import TimingStats
from rlinf_robot.safety import ArmAction, EStop, Rejection, Watchdog

log = logging.getLogger(__name__)

#: Filter adjustments after which the target is an intermediate step, not the goal itself.
_SCALED = frozenset({"scaled_step", "scaled_rotation", "clamped_workspace"})


class GoalTracker:
    def __init__(
        self,
        slot: GoalSlot,
        servo: Servo,
        resolver: GoalResolver,
        faults: FaultHandler,
        machine: FaultStateMachine,
        estop: EStop,
        watchdog: Watchdog,
        gripper: GripperWorker | None,
        home_q: np.ndarray,
        home_tolerance: float,
        counters: Counter[str],
        latency: TimingStats,
    ):
        self.slot = slot
        self.servo = servo
        self.resolver = resolver
        self.faults = faults
        self.machine = machine
        self.estop = estop
        self.watchdog = watchdog
        self.gripper = gripper
        self.home_q = home_q
        self.home_tolerance = home_tolerance
        self.counters = counters
        self.latency = latency  # s from a command's stamp to its motion being handed to franky

    def track(self, reading: ArmReading) -> None:
        """One tick with the arm ACTIVE."""
        goal = self.slot.goal
        if goal is None:
            self._keep_braking(reading)
            return
        if goal.generation != self.estop.generation:
            self.slot.drop(goal, "dropped_before_stop", outcome="estop")
            return
        if goal.expires and not self.watchdog.is_fresh(goal.stamp):
            self.watchdog.expired()
            self.slot.drop(goal, "dropped_stale")
            self.brake_now()  # the command that set this motion is stale: stop it, do not finish it
            return
        if goal.final is not None:
            target, safe = goal.final, None  # handed over unscaled already: nothing left to check
        else:
            width = self.gripper.width if self.gripper is not None else 0.0
            result = self.resolver.resolve(goal, reading.q_d, width)
            if isinstance(result, Rejection):
                # admitted earlier, refused now (the commanded position moved): say where the arm was
                log.warning(
                    "%s goal dropped mid-way (%s): %s; commanded q_d %s, measured q %s",
                    goal.source,
                    result.reason,
                    result.detail,
                    np.round(reading.q_d, 3).tolist(),
                    np.round(reading.q, 3).tolist(),
                )
                self.slot.drop(goal, f"rejected_{result.reason}")
                self.counters["rejected"] += 1
                return
            target, safe = result
            if not _SCALED.intersection(safe.adjustments):
                goal.final = target
        if goal.via and _arrived(target, goal.action.values, reading):
            goal.action, goal.final = ArmAction("joint_position", goal.via.pop(0)), None  # next segment
            return
        if (
            goal.source == "home"
            and np.max(np.abs(target - self.home_q)) < 1e-9  # the filter let the home pose through ...
            and np.max(np.abs(reading.q_d - self.home_q)) < 1e-6  # ... the motion generator got there ...
            and np.max(np.abs(reading.q - self.home_q)) < self.home_tolerance  # ... and the arm too
        ):
            self.slot.drop(goal, "homed")
            return
        with self.servo.lock:
            if self.machine.state is not ArmState.ACTIVE:
                return
            if self.faults.call(lambda: self.servo.move(target)) is not None:
                return
        if not goal.applied:  # first time this goal reaches the arm
            goal.applied = True
            self.latency.add(time.time() - goal.wall_stamp)
            if safe is not None and safe.gripper is not None and self.gripper is not None:
                self.gripper.move(safe.gripper)
        if goal.one_shot and goal.final is not None:
            self.slot.drop(goal, "deltas_handed_over")  # one bounded step: the arm finishes it (see goals)

    def brake_now(self) -> tuple[bool, str]:
        """Brake where the running motion can stop (``Servo.brake``); nothing to do unless ACTIVE."""
        if self.machine.state is not ArmState.ACTIVE:
            return True, f"the arm is {self.machine.state.value}: nothing moves"
        with self.servo.lock:
            failed = self.faults.call(self.servo.brake)
        if failed is not None:
            what = "reflex" if isinstance(failed, ReflexError) else "link lost"
            return False, f"{what} while braking: {failed}"
        return True, "holding"

    def _keep_braking(self, reading: ArmReading) -> None:
        """Brake again from further along if the running brake is being overrun (``Servo.brake_overrun``)."""
        if self.servo.brake_overrun(reading) and self.machine.state is ArmState.ACTIVE:
            self.counters["brakes_extended"] += 1
            self.brake_now()


def _arrived(target: np.ndarray, waypoint: np.ndarray, reading: ArmReading) -> bool:
    """The filter let ``waypoint`` through unscaled and the motion generator got there."""
    return bool(np.max(np.abs(target - waypoint)) < 1e-9 and np.max(np.abs(reading.q_d - waypoint)) < 1e-6)
