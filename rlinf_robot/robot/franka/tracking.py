"""How the Franka driver follows its goal, one control tick at a time.

A mixin of ``FrankaArm`` (it uses the arm's link, resolver, watchdog and counters). Each tick the
current goal is re-checked by the safety filter against the commanded position and handed to franky
as an asynchronous joint motion; a stale goal brakes, a refused one is dropped, a delta ends once
its target is handed over. Every way a goal ends goes through ``_goal_ended``, so a ``home()``
caller hears at once how its homing ended.
"""

from __future__ import annotations

import time

import numpy as np

from rlinf_robot.robot.franka.faults import ArmState
from rlinf_robot.robot.franka.goals import Goal
from rlinf_robot.robot.franka.link import ArmReading
from rlinf_robot.safety import Rejection

#: Filter adjustments after which the target is an intermediate step, not the goal itself.
_SCALED = frozenset({"scaled_step", "scaled_rotation", "clamped_workspace"})
_MOVED = 1e-7  # rad: a target closer than this to the last one sent is not re-sent


class GoalTracking:
    def _track(self, reading: ArmReading) -> None:
        with self._goal_lock:
            goal = self._goal
        if goal is None:
            self._keep_braking(reading)
            return
        if goal.generation != self.estop.generation:
            self._drop(goal, "dropped_before_stop", outcome="estop")
            return
        if goal.expires and not self.watchdog.is_fresh(goal.stamp):
            self.watchdog.expired()
            self._drop(goal, "dropped_stale")
            self._brake_now()  # the command that set this motion is stale: stop it, do not finish it
            return
        if goal.final is not None:
            target, safe = goal.final, None  # handed over unscaled already: nothing left to check
        else:
            width = self.gripper.width if self.gripper is not None else 0.0
            result = self.resolver.resolve(goal, reading.q_d, width)
            if isinstance(result, Rejection):
                self._drop(goal, f"rejected_{result.reason}")
                self.counters["rejected"] += 1
                return
            target, safe = result
            if not _SCALED.intersection(safe.adjustments):
                goal.final = target
        if (
            goal.source == "home"
            and np.max(np.abs(target - self._home_q)) < 1e-9  # the filter let the home pose through ...
            and np.max(np.abs(reading.q_d - self._home_q)) < 1e-6  # ... the motion generator got there ...
            and np.max(np.abs(reading.q - self._home_q)) < self.config.home_tolerance  # ... and the arm too
        ):
            self._drop(goal, "homed")
            return
        with self._motion_lock:
            if self.faults.state is not ArmState.ACTIVE:
                return
            if self._last_sent is None or np.max(np.abs(target - self._last_sent)) > _MOVED:
                if self._franky_call(lambda: self.link.move_joints(target)) is not None:
                    return
                self._last_sent = target
                self._braking = False
        if not goal.applied:  # first time this goal reaches the arm
            goal.applied = True
            self.latency.add(time.time() - goal.wall_stamp)
            if safe is not None and safe.gripper is not None and self.gripper is not None:
                self.gripper.move(safe.gripper)
        if goal.one_shot and goal.final is not None:
            self._drop(goal, "deltas_handed_over")  # one bounded step: the arm finishes it (see goals)

    def _drop(self, goal: Goal, why: str, outcome: str | None = None) -> None:
        """The loop ends ``goal`` (counted as ``why``) unless a stop, hold or newer command already
        took it away: each goal ends once, told by whoever removed it (``outcome``, else ``why``)."""
        with self._goal_lock:
            if self._goal is not goal:
                return
            self._goal = None
        self.counters[why] += 1
        self._goal_ended(goal, outcome or why)

    def _clear_goal(self, why: str = "cleared") -> None:
        with self._goal_lock:
            goal, self._goal = self._goal, None
        if goal is not None:
            self._goal_ended(goal, why)

    def _goal_ended(self, goal: Goal, why: str) -> None:
        """A ``home()`` caller learns at once when its goal ends, whether homed or not (a stop, a
        hold or a reflex while homing must not leave the home service waiting out its timeout)."""
        if goal.source == "home":
            self._home_outcome = why
            self._home_done.set()
