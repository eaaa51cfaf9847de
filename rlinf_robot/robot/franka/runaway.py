"""``RunawayGuard``: stop a motion franky commands faster than any this driver planned.

Every motion the driver hands franky is planned within the joint velocity limits scaled by the
dynamics factor (``braking.within_planner_limits`` keeps takeovers from starting beyond them). On
franka-sim under CPU starvation, franky's commanded trajectory still ran away once per few hybrid
runs: commanded joint 1 velocity reached -11 rad/s (at factor 0.2 the planner's top speed is
0.52 rad/s) and four or five joints hit their hardware stops within 3 s, from where homing could
not get back. franka-sim logged the motion-limit violations but, not enforcing them, followed;
the real FR3 aborts such a motion with a reflex (``joint_motion_generator_velocity_limits_
violation``). This guard does the same on every arm: commanded positions moving beyond ``FACTOR``
times the planner's top speed, with the arm itself beyond ``MEASURED_FACTOR`` times it, on
``READINGS`` consecutive control-loop readings stop the motion and are raised as a reflex, so the
fault handler holds the arm and recovers it as for a real one.
The commanded velocity is measured from the commanded *positions* between the loop's readings,
over the controller's own clock (``ArmReading.robot_t``), not taken from the reported ``dq_d``: on
a starved machine commanded positions arrive bunched and ``dq_d`` (their difference over one
millisecond) read 1.5 rad/s at the start of an ordinary 0.52 rad/s move, and our reads' own times
lag the states they return (under a 1-CPU cap, a fuzz run's ordinary moves looked like runaways
over our clock). Several consecutive readings, so a single odd one does not count.
"""

from __future__ import annotations

import numpy as np

from rlinf_robot.robot.franka.braking import LIMIT_MARGIN
from rlinf_robot.robot.franka.link import ArmReading

#: Times the planner's top speed (scaled limits plus braking.LIMIT_MARGIN) the commanded positions
#: may move at before the motion counts as a runaway (capped at the joint's velocity limit): the
#: runaways seen ran at 8-20x; franky's commands, stalled by lost cycles and then caught up, read
#: up to ~2x over a loop period while the arm itself went at its planned speed.
FACTOR = 4.0
#: ... and the arm itself (measured positions) at least this many times the planner's top speed,
#: so a burst of caught-up commands the arm does not follow does not count.
MEASURED_FACTOR = 2.0
#: Consecutive readings beyond it before the motion is stopped.
READINGS = 3


class RunawayGuard:
    def __init__(self, joint_velocity_max: np.ndarray, dynamics_factor: float):
        v_max = np.asarray(joint_velocity_max, dtype=np.float64)
        top = v_max * dynamics_factor * (1.0 + LIMIT_MARGIN)
        self.bound = np.minimum(top * FACTOR, v_max)
        self.measured_bound = np.minimum(top * MEASURED_FACTOR, v_max)
        self._beyond = 0
        self._last: tuple[float, np.ndarray, np.ndarray] | None = None

    def forget(self) -> None:
        """Start over (after a stop or a reconnect: the next reading has no predecessor)."""
        self._last, self._beyond = None, 0

    def check(self, reading: ArmReading) -> str | None:
        """Why the commanded motion must stop now, or None."""
        t = reading.robot_t if np.isfinite(reading.robot_t) else reading.t
        last = self._last
        self._last = (t, np.asarray(reading.q_d, dtype=np.float64), np.asarray(reading.q, dtype=np.float64))
        if last is None or t <= last[0]:
            return None  # the same state again (the controller's clock did not move): nothing new
        v = (self._last[1] - last[1]) / (t - last[0])
        moved = (self._last[2] - last[2]) / (t - last[0])
        if not np.any((np.abs(v) > self.bound) & (np.abs(moved) > self.measured_bound)):
            self._beyond = 0
            return None
        self._beyond += 1
        if self._beyond < READINGS:
            return None
        self._beyond = 0
        j = int(np.argmax(np.abs(v) / self.bound))
        return (
            f"runaway motion stopped: commanded joint {j + 1} moving at {v[j]:.2f} rad/s, beyond "
            f"{self.bound[j]:.2f} rad/s on {READINGS} readings (commanded q_d "
            f"{np.round(reading.q_d, 3).tolist()})"
        )
