"""``Servo``: the motion the Franka driver last handed to franky, and the brake.

The one owner of what was sent: a tick's new target, a brake and an e-stop all go through here,
under ``lock``, so they never interleave (a caller that checks the arm's state before sending holds
the lock across both). Its methods raise franky's errors as ``ReflexError`` / ``LinkLost``
(``FrankyLink``); the control loop hands those to the fault handler.

A *brake* takes the running motion over with one that ends where the arm can stop without
reversing (``braking``), never back to where the arm was measured: a target behind a moving arm
makes the planner drive back.
"""

from __future__ import annotations

import threading

import numpy as np

from rlinf_robot.robot.franka.link import ArmReading, FrankyLink

_MOVED = 1e-7  # rad: a target closer than this to the last one sent is not re-sent
_RESTING_RAD_S = 1e-4  # commanded joint speed below which a brake is done
_PAST_RAD = 1e-6  # how far past its braking target a commanded joint counts as overrunning it


class Servo:
    def __init__(self, link: FrankyLink, q_lo: np.ndarray, q_hi: np.ndarray):
        self.link = link
        self.q_lo, self.q_hi = q_lo, q_hi
        self.lock = threading.Lock()
        self.last_sent: np.ndarray | None = None  # the target of the motion franky runs
        self.braking = False  # that motion is a brake
        self.brake_pending = False  # a brake franky could not take over with yet (see FrankyLink)
        self.running = False  # franky ran a motion at the last poll

    def move(self, target: np.ndarray) -> None:
        """Hand ``target`` to franky, unless the running motion goes there already (or cannot be
        taken over this tick: then the next tick sends it). Call with ``lock`` held."""
        if self.last_sent is None or np.max(np.abs(target - self.last_sent)) > _MOVED:
            if self.link.move_joints(target):
                self.last_sent = target
                self.braking = self.brake_pending = False

    def brake(self) -> None:
        """Take the running motion over with one that stops where it can; if it cannot be taken
        over now, the brake is pending and the next tick brakes (``brake_overrun``). Call with
        ``lock`` held."""
        sent = self.link.brake(self.q_lo, self.q_hi)
        if sent is None:
            self.brake_pending = True
            return
        self.last_sent, self.braking, self.brake_pending = sent, True, False

    def brake_overrun(self, reading: ArmReading) -> bool:
        """Whether to brake again: a brake is pending (it could not take over yet), or the running
        brake ends behind where the arm can now stop.

        A braking target assumes franky takes the new motion over ``latency_s`` after the state was
        read. On a starved machine the loop can be 50 ms late in between, the commanded motion runs
        past the target, and the planner would then drive back (0.5-5 mrad seen against franka-sim
        with the CPU throttled). Seen each tick from the commanded state: a joint still moving away
        from the target. Braking again from there only moves the target further along the motion.
        """
        if self.brake_pending:
            return True
        if not self.braking or self.last_sent is None:
            return False
        moving = np.abs(reading.dq_d) > _RESTING_RAD_S
        if not moving.any():
            self.braking = False  # at rest: the brake is done
            return False
        beyond = np.sign(reading.dq_d) * (reading.q_d - self.last_sent) > _PAST_RAD
        return bool(np.any(moving & beyond))

    def stop(self) -> None:
        """Preempt the motion now (the e-stop path: it does not wait for a tick)."""
        with self.lock:
            self.link.stop()
            self.last_sent = None
            self.brake_pending = False

    def forget(self) -> None:
        """The controller dropped its motion (reflex, recovery, reset, lost link): send afresh."""
        self.last_sent = None
        self.brake_pending = False
