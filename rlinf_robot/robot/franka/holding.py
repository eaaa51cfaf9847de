"""How the Franka driver stops the arm: a smooth, non-latching *hold* and the latching *e-stop*.

A mixin of ``FrankaArm`` (it uses the arm's link, state machine, goal and counters), kept apart so
the two ways of stopping read side by side. A hold brakes to where the running motion can stop
(``braking``), never back to where the arm was measured; an e-stop preempts the motion at once and
refuses everything until an operator resets it. Both refuse commands issued before them.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from rlinf_robot.errors import ReflexError
from rlinf_robot.robot.franka.faults import ArmState
from rlinf_robot.robot.franka.link import ArmReading

log = logging.getLogger(__name__)
_RESTING_RAD_S = 1e-4  # commanded joint speed below which a brake is done
_PAST_RAD = 1e-6  # how far past its braking target a commanded joint counts as overrunning it


class Holding:
    def hold(self, reason: str = "hold requested", timeout_s: float = 2.0) -> tuple[bool, str]:
        """Stop smoothly and stay: the running motion is taken over by one that ends where it can
        stop without reversing (``braking``), the goal is dropped, and commands issued before now are
        refused. Not latching: the next fresh command moves the arm again. Deadman trips and lease
        loss upstream (bridge_node) end here."""
        self._hold_wall = time.time()
        self._clear_goal("hold")
        self.counters["holds"] += 1
        log.info("hold: %s", reason)
        return self._in_loop(self._brake_now, timeout_s)

    def _brake_now(self) -> tuple[bool, str]:
        if self.faults.state is not ArmState.ACTIVE:
            return True, f"the arm is {self.faults.state.value}: nothing moves"
        limits = self.safety.limits

        def brake() -> None:
            self._last_sent = self.link.brake(limits.q_lo, limits.q_hi)
            self._braking = True

        with self._motion_lock:
            failed = self._franky_call(brake)
        if failed is not None:
            what = "reflex" if isinstance(failed, ReflexError) else "link lost"
            return False, f"{what} while braking: {failed}"
        return True, "holding"

    def _keep_braking(self, reading: ArmReading) -> None:
        """Brake again if the last brake ends behind where the arm can stop.

        A braking target assumes franky takes the new motion over ``latency_s`` after the state was
        read. On a starved machine the loop can be 50 ms late in between, the commanded motion runs
        past the target, and the planner would then drive back (0.5-5 mrad seen against franka-sim
        with the CPU throttled). Seen each tick from the commanded state: a joint still moving away
        from the target. Braking again from there only moves the target further along the motion.
        """
        if not self._braking or self._last_sent is None:
            return
        moving = np.abs(reading.dq_d) > _RESTING_RAD_S
        if not moving.any():
            self._braking = False
            return
        beyond = np.sign(reading.dq_d) * (reading.q_d - self._last_sent) > _PAST_RAD
        if np.any(moving & beyond) and self.faults.state is ArmState.ACTIVE:
            self.counters["brakes_extended"] += 1
            self._brake_now()

    def stop(self, reason: str = "stop requested") -> None:
        """Latching e-stop: preempt the motion now, drop the goal, refuse commands until ``reset``."""
        self.estop.trigger(reason)
        self._stop_wall = time.time()
        self.faults.fire("estop", reason)
        self._clear_goal("estop")
        with self._motion_lock:
            self.link.stop()
            self._last_sent = None
