"""``FrankyLink``: the one place this project talks to franky (and through it, libfranka).

Every module that drives a Franka goes through here: ``FrankaArm`` (the driver behind
``franka_node`` and the ROS-free bridge), the Franka Hand worker (``connect_gripper``) and the
system-identification recording (``FrankyLink.run_velocity_profile``). ``robot/franka/braking.py``
reads the connected ``franky.Robot`` this class hands it, without importing franky itself.

It turns franky's exceptions into our typed errors — ``ReflexError`` for control/reflex/planner
errors the arm can recover from, ``LinkLost`` for a dead network link — so the driver above it
decides with ``except`` clauses, not by parsing messages.

Motions: every target is an *asynchronous* ``JointMotion`` with ``return_when_finished=False``:
franky plans it with Ruckig from the current commanded state, a newer target takes over seamlessly
from wherever the previous one is, and when no new target comes the arm keeps holding the last one
(a servo that settles, instead of a motion that ends and lets the arm sag).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rlinf_robot.errors import LinkLost, MissingDependency, ReflexError
from rlinf_robot.robot.franka.braking import franky_braking_target, within_planner_limits
from rlinf_robot.robot.sched import keep_scheduling

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArmReading:
    """One state sample from the controller."""

    t: float  # monotonic time of the read
    q: np.ndarray  # measured joint positions
    dq: np.ndarray
    q_d: np.ndarray  # desired (commanded) joint positions: where the motion generator continues from
    dq_d: np.ndarray  # desired joint velocities
    mode: str  # franka RobotMode name: Idle, Move, Reflex, ...
    #: The controller's own clock at that state (s; libfranka's ``RobotState.time``): what commanded
    #: positions are differenced over (``RunawayGuard``), whatever our read's latency.
    robot_t: float = float("nan")


def _franky():
    try:
        import franky
    except ImportError as exc:  # pragma: no cover - franky is part of the robot extra
        raise MissingDependency("franky-control", extra="robot") from exc
    return franky


def connect_gripper(host: str):
    """A connected ``franky.Gripper`` (the Franka Hand has a connection of its own); raises
    whatever franky raises when nobody answers (the gripper worker retries)."""
    franky = _franky()
    with keep_scheduling():  # libfranka makes the connecting thread SCHED_FIFO 99 otherwise
        return franky.Gripper(host)


#: One recorded controller cycle: (seconds, measured q, measured dq, commanded joint velocity dq_d).
Cycle = tuple[float, np.ndarray, np.ndarray, np.ndarray]


#: Wall seconds beyond a velocity profile's own allowance before it counts as stuck even though the
#: controller's clock has not run out (the controller stopped reporting cycles).
_STALLED_CONTROLLER_S = 120.0


class FrankyLink:
    def __init__(self, host: str, realtime: bool = False, dynamics_factor: float = 0.2):
        self.host = host
        self.realtime = realtime
        self._factor = dynamics_factor
        self._robot = None
        self.deferred_takeovers = 0  # motions not handed over: the commanded state had spiked
        self._deferral_logged = -math.inf

    @property
    def connected(self) -> bool:
        return self._robot is not None

    def connect(self) -> None:
        """One connection attempt; raises ``LinkLost`` when the controller does not answer."""
        franky = _franky()
        rt = franky.RealtimeConfig.Enforce if self.realtime else franky.RealtimeConfig.Ignore
        try:
            with keep_scheduling():  # libfranka's constructor makes the calling thread SCHED_FIFO 99
                robot = franky.Robot(self.host, realtime_config=rt)
            robot.relative_dynamics_factor = self._factor
        except Exception as exc:  # franky raises several unrelated types for "nobody there"
            raise LinkLost(f"cannot connect to the arm at {self.host}: {exc}") from exc
        self._robot = robot

    def close(self) -> None:
        robot, self._robot = self._robot, None
        if robot is not None:
            try:
                robot.stop()
            except Exception:
                pass
            del robot

    def set_dynamics_factor(self, factor: float) -> None:
        self._factor = float(factor)
        if self._robot is not None:
            self._robot.relative_dynamics_factor = self._factor

    def read(self) -> ArmReading:
        robot = self._require()
        try:
            s = robot.state
        except Exception as exc:
            raise LinkLost(f"lost the arm at {self.host}: {exc}") from exc
        return ArmReading(
            t=time.monotonic(),
            q=np.array(s.q, dtype=np.float64),
            dq=np.array(s.dq, dtype=np.float64),
            q_d=np.array(s.q_d, dtype=np.float64),
            dq_d=np.array(s.dq_d, dtype=np.float64),
            mode=str(s.robot_mode).rsplit(".", 1)[-1],
            robot_t=float(s.time.to_sec()),
        )

    def move_joints(self, target: np.ndarray) -> bool:
        """Start (or take over with) an asynchronous joint motion to ``target``. False, and nothing
        sent, when the commanded state a takeover would start from is not one the planner can have
        produced (``braking.within_planner_limits``): the running motion goes on, and the caller
        tries again at its next tick."""
        robot = self._require()
        if not self._can_take_over(robot):
            return False
        self._send(robot, target)
        return True

    def _send(self, robot, target: np.ndarray) -> None:
        motion = _franky().JointMotion([float(x) for x in target], return_when_finished=False)
        self._guard(lambda: robot.move(motion, asynchronous=True))

    def brake(self, q_lo: np.ndarray | None = None, q_hi: np.ndarray | None = None) -> np.ndarray | None:
        """Take over the running motion with one that stops where it can (see ``braking``) and
        keeps holding there; returns that target, or None when no takeover was possible now (see
        ``move_joints``)."""
        robot = self._require()
        if not self._can_take_over(robot):
            return None
        try:  # the state read here is the one the takeover starts from: nothing slow after it
            target = franky_braking_target(robot, self._factor, q_lo, q_hi)
        except Exception as exc:
            raise LinkLost(f"lost the arm at {self.host}: {exc}") from exc
        self._send(robot, target)
        return target

    def _can_take_over(self, robot) -> bool:
        """Whether a motion may take over now: on a starved machine commanded positions arrive
        bunched and the arm reports velocity / acceleration spikes, which franky would start the
        new trajectory from (a hold swung joint 1 by 2.7 rad that way on franka-sim). Only a state
        whose trajectory would exceed the planner's speed defers it (``within_planner_limits``)."""
        try:
            s = robot.state
            ok = within_planner_limits(
                np.array(s.dq_d),
                np.array(s.ddq_d),
                np.array(robot.joint_velocity_limit.get()),
                np.array(robot.joint_jerk_limit.get()),
                self._factor,
            )
        except Exception as exc:
            raise LinkLost(f"lost the arm at {self.host}: {exc}") from exc
        if not ok:
            self.deferred_takeovers += 1
            now = time.monotonic()
            if now - self._deferral_logged >= 1.0:  # at most once a second: a starved loop ticks at 200 Hz
                self._deferral_logged = now
                log.warning(
                    "takeover deferred (%d so far): commanded state beyond the planner's limits "
                    "(dq_d %s, ddq_d %s)",
                    self.deferred_takeovers,
                    np.round(np.array(s.dq_d), 3),
                    np.round(np.array(s.ddq_d), 1),
                )
        return ok

    def poll(self) -> bool:
        """Whether a motion runs; raises ``ReflexError`` / ``LinkLost`` if the last one failed."""
        robot = self._require()
        return bool(self._guard(robot.poll_motion))

    def stop(self) -> None:
        """Preempt the running motion (the arm stops on its controller's stop trajectory)."""
        if self._robot is None:
            return
        try:
            self._robot.stop()
        except Exception:
            pass  # a stop that fails because the motion already died is still a stop
        try:
            self._robot.join_motion(timeout=1.0)
        except Exception:
            pass

    def run_velocity_profile(
        self,
        start: np.ndarray,
        velocities: Sequence[np.ndarray],
        dt_s: float,
        check: Callable[[np.ndarray], str | None],
        move_dynamics_factor: float = 0.2,
        timeout_s: float = 10.0,
    ) -> tuple[list[Cycle], str | None]:
        """Move to ``start``, then run ``velocities`` as joint-velocity waypoints ``dt_s`` apart,
        recording every 1 kHz controller cycle. ``check(q)`` sees each recorded position as it
        arrives; the first reason it returns stops the arm at once. Returns the cycles and the
        stop reason (None when the profile ran to its end within its duration + ``timeout_s``).
        The link's dynamics factor is restored afterwards."""
        franky = _franky()
        robot = self._require()
        self._guard(robot.recover_from_errors)
        robot.relative_dynamics_factor = 1.0  # the waypoints' own limits govern the motion
        try:
            start_motion = franky.JointMotion(
                [float(x) for x in start], relative_dynamics_factor=move_dynamics_factor
            )
            self._guard(lambda: robot.move(start_motion))
            rows: list[Cycle] = []

            def on_cycle(state, _step, _rel, abs_time, _signal):
                rows.append((_seconds(abs_time), np.array(state.q), np.array(state.dq), np.array(state.dq_d)))

            dt_ms = int(round(dt_s * 1000))
            motion = franky.JointVelocityWaypointMotion(
                [
                    franky.JointVelocityWaypoint([float(x) for x in v], minimum_time=franky.Duration(dt_ms))
                    for v in velocities
                ]
            )
            motion.register_callback(on_cycle)
            # "in time" on the controller's clock (each cycle's stamp): a starved machine stalls the
            # controller with everything else and the profile then takes longer in wall time (a
            # capped test run stopped every excitation so); the wall clock is a backstop for a
            # controller that stops reporting
            allowed = len(velocities) * dt_s + timeout_s
            deadline = time.monotonic() + allowed + _STALLED_CONTROLLER_S
            stop_reason = None
            checked = 0
            robot.move(motion, asynchronous=True)
            while True:
                try:
                    if robot.join_motion(timeout=0.005):
                        break
                except Exception:
                    if stop_reason is None:
                        raise
                    break  # the motion we stopped ends with an error: that is the stop
                reason, n = None, len(rows)
                for row in rows[checked:n]:
                    reason = reason or check(row[1])
                checked = n
                ran = rows[n - 1][0] - rows[0][0] if n else 0.0
                if reason is None and (ran > allowed or time.monotonic() > deadline):
                    reason = "the profile did not finish in time"
                if reason is not None and stop_reason is None:
                    stop_reason = reason
                    robot.stop()
            return rows, stop_reason
        finally:
            robot.relative_dynamics_factor = self._factor

    def has_errors(self) -> bool:
        return bool(self._require().has_errors)

    def out_of_control(self, wait_s: float = 0.05) -> bool:
        """Whether franky runs no motion now, stopping one that still runs and waiting up to
        ``wait_s`` for it to end. A recovery waits for this: libfranka's error recovery sent while
        franky's motion thread still ran left that thread wedged on franka-sim (``join_motion``
        never returned; probed with a slow ``JointMotion``), and once left franka_node in
        RECOVERING for good after a runaway stop under a 1-CPU cap. After ``stop`` the thread
        left control within 3 ms on a quiet machine."""
        robot = self._require()
        if not self._guard(lambda: robot.is_in_control):
            return True
        try:
            robot.stop()
        except Exception:
            pass  # a motion that already died with an error is ending: the loop below sees it
        deadline = time.monotonic() + wait_s
        while self._guard(lambda: robot.is_in_control):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
        try:
            robot.join_motion(timeout=0.0)  # collect the ended motion's error; it is not news
        except Exception:
            pass
        return True

    def recover(self) -> bool:
        """libfranka's error recovery; False, and nothing sent, while a motion is still ending
        (``out_of_control``)."""
        robot = self._require()
        if not self.out_of_control():
            return False
        return bool(self._guard(robot.recover_from_errors))

    def _require(self):
        if self._robot is None:
            raise LinkLost(f"not connected to the arm at {self.host}")
        return self._robot

    @staticmethod
    def _guard(call):
        franky = _franky()
        try:
            return call()
        except (franky.NetworkException, franky.ProtocolException) as exc:
            raise LinkLost(str(exc)) from exc
        except franky.Exception as exc:  # ControlException (reflexes), CommandException, ...
            raise ReflexError(str(exc).strip()) from exc
        except RuntimeError as exc:
            # franky's motion planner (Ruckig) and libfranka's "Net Exception" both surface as
            # RuntimeError; the network one means the link is gone, the rest need a recovery.
            if "Net" in str(exc) or "network" in str(exc).lower():
                raise LinkLost(str(exc)) from exc
            raise ReflexError(str(exc).strip()) from exc


def _seconds(d) -> float:
    """franky's ``Duration`` in seconds (its accessor's name differs between versions)."""
    for attr in ("to_sec", "seconds"):
        if hasattr(d, attr):
            v = getattr(d, attr)
            return float(v() if callable(v) else v)
    return float(d)
