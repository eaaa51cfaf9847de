"""``FrankaArm``: the Franka FR3 on franky, behind the safety filter and the fault state machine.

One thread owns the franky connection. Every tick (``control_rate_hz``) it reads the state, hands
it to listeners (the ROS node publishes it), checks the running motion for a reflex, recovers if
it must, and sends the current goal — re-checked by the safety filter against the commanded
position — as an asynchronous joint motion that takes over from the previous one. Callers from
other threads (ROS callbacks, the bridge) only *submit* goals and request operations; operations
that touch franky (reset, recover, dynamics changes) run inside the loop between two ticks, so no
two threads ever drive libfranka at once. The one exception is ``stop``: an e-stop must not wait
for a tick, so it preempts the motion directly, under the same lock the loop holds while it moves.

The state lives in small parts the arm composes, each the one owner of what it holds: the
``GoalSlot`` (the goal the loop tracks, and how each goal ended), the ``Servo`` (what was last sent
to franky, the brake), the ``FaultHandler`` (reflexes, recoveries, a lost link, resets, over the
``FaultStateMachine``) and the ``GoalTracker`` (one tick of following the goal). ``_tick`` calls
them in order, top to bottom.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlinf_robot.errors import LinkLost, ReflexError
from rlinf_robot.robot.base import Feature, Robot
from rlinf_robot.robot.franka.config import FrankaConfig
from rlinf_robot.robot.franka.faults import ArmState, FaultStateMachine
from rlinf_robot.robot.franka.goals import ABSOLUTE_MODES, Goal, GoalResolver, GoalSlot
from rlinf_robot.robot.franka.gripper import GripperWorker
from rlinf_robot.robot.franka.link import ArmReading, FrankyLink
from rlinf_robot.robot.franka.model import JOINT_NAMES, tcp_pose
from rlinf_robot.robot.franka.recovery import FaultHandler
from rlinf_robot.robot.franka.runaway import RunawayGuard
from rlinf_robot.robot.franka.servo import Servo
from rlinf_robot.robot.franka.tracking import GoalTracker
from rlinf_robot.robot.loop import PeriodicLoop
from rlinf_robot.robot.registry import register_robot
from rlinf_robot.robot.timing import TimingStats
from rlinf_robot.safety import ArmAction, EStop, Rejection, SafeAction, SafetyFilter, Watchdog
from rlinf_robot.safety.homing import NoWayHome, plan_home

log = logging.getLogger(__name__)

#: How many times ``home`` tries in all (the first and its retries).
HOME_TRIES = 3
#: How long ``home`` waits for the fault handler to recover from a reflex before retrying.
_RECOVERED_WITHIN_S = 5.0

_FUTURE_STAMP_S = 0.5  # a command stamped further in the future than this is refused (clock skew)


@dataclass(frozen=True)
class ArmObservation:
    t: float  # monotonic
    wall: float  # time.time() of the read, for message stamps
    q: np.ndarray
    dq: np.ndarray
    q_d: np.ndarray
    ee_pose: np.ndarray  # TCP [x y z qw qx qy qz] by our FK
    gripper_width: float
    state: ArmState


@register_robot(FrankaConfig)
class FrankaArm(Robot):
    name = "franka"

    def __init__(self, config: FrankaConfig):
        self.config = config
        self.safety = SafetyFilter(config.limits(), control_hz=1.0 / config.goal_lead_s)
        limits = self.safety.limits
        self.watchdog = Watchdog(config.deadman_ms)
        self.estop = EStop()
        self.faults = FaultStateMachine(config.max_faults, config.fault_window_s)
        self.link = FrankyLink(config.robot_ip, config.realtime, config.relative_dynamics_factor)
        self.gripper = (
            GripperWorker(
                config.robot_ip,
                config.gripper_speed,
                config.gripper_force,
                reconnect_period_s=config.reconnect_period_s,
            )
            if config.gripper
            else None
        )
        self.counters: Counter[str] = Counter()
        self.periods = TimingStats()  # s between successive state reads
        self.latency = TimingStats()  # s from a command's stamp to its motion being handed to franky
        self.dynamics_factor = config.relative_dynamics_factor
        self._home_q = np.array(config.home_q)
        self._rehoming = threading.Lock()  # held while a rehome after a recovery plans its way
        # the parts, each owning its state
        self.resolver = GoalResolver(self.safety)
        self.slot = GoalSlot(self.counters)
        self.servo = Servo(self.link, limits.q_lo, limits.q_hi)
        self.runaway = RunawayGuard(limits.joint_velocity_max, self.dynamics_factor)
        self.recovery = FaultHandler(
            config,
            self.link,
            self.faults,
            self.slot,
            self.servo,
            self.estop,
            self.watchdog,
            self.counters,
            publish=self._publish,
            rehome=self._rehome,
        )
        self.tracker = GoalTracker(
            self.slot,
            self.servo,
            self.resolver,
            self.recovery,
            self.faults,
            self.estop,
            self.watchdog,
            self.gripper,
            self._home_q,
            config.home_tolerance,
            self.counters,
            self.latency,
        )
        self._obs: ArmObservation | None = None
        self._listeners: list[Callable[[ArmObservation], None]] = []
        self._loop = PeriodicLoop(
            config.control_rate_hz,
            self._tick,
            name="franka-arm",
            priority=config.loop_priority,
            nice=config.loop_nice,
        )
        self._last_read_t: float | None = None
        self._stop_wall = -math.inf  # commands stamped before the last stop / hold are refused
        self._hold_wall = -math.inf

    # ------------------------------------------------------------------ Robot API
    @property
    def is_connected(self) -> bool:
        return self._loop.running and self.faults.link_up

    def connect(self) -> None:
        """Connect (retrying up to ``connect_timeout_s``), then start the control loop."""
        deadline = time.monotonic() + self.config.connect_timeout_s
        while True:
            try:
                self.link.connect()
                break
            except LinkLost:
                if time.monotonic() > deadline:
                    raise
                time.sleep(min(self.config.reconnect_period_s, 0.2))
        if self.link.has_errors():
            self.link.recover()
        if self.gripper is not None:
            try:
                self.gripper.connect(timeout_s=max(deadline - time.monotonic(), 1.0))
            except ConnectionError as exc:
                self.link.close()
                raise LinkLost(f"{exc} (set gripper: false for an arm without a hand)") from exc
        self.faults.fire("connected", f"connected to {self.config.robot_ip}")
        self._publish(self.link.read())
        self._loop.start()

    def disconnect(self) -> None:
        self._loop.stop()
        self.slot.clear("disconnected")
        self.link.close()
        if self.gripper is not None:
            self.gripper.close()
        self.faults.fire("link_lost", "disconnected on request")

    def get_observation(self) -> dict[str, Any]:
        obs = self._obs
        if obs is None:
            raise LinkLost("no state received yet: connect() first")
        return {
            "joint_pos": obs.q,
            "joint_vel": obs.dq,
            "ee_pose": obs.ee_pose,
            "gripper_width": np.array([obs.gripper_width]),
            "state": self.state.value,
            "t": obs.t,
        }

    def send_action(self, action: ArmAction) -> SafeAction | Rejection:
        return self.submit(action)

    def features(self) -> dict[str, dict[str, Feature]]:
        return {
            "observation": {
                "joint_pos": Feature((7,), names=JOINT_NAMES),
                "joint_vel": Feature((7,), names=JOINT_NAMES),
                "ee_pose": Feature((7,), names=("x", "y", "z", "qw", "qx", "qy", "qz")),
                "gripper_width": Feature((1,)),
            },
            "action": {
                "joint_position": Feature((7,), names=JOINT_NAMES),
                "joint_delta": Feature((7,), names=JOINT_NAMES),
                "ee_target": Feature((7,)),
                "ee_delta": Feature((6,)),
                "gripper": Feature((1,)),
            },
        }

    # ------------------------------------------------------------------ lifecycle
    def activate(self) -> None:
        self.slot.clear("activated")
        self.watchdog.reset()
        self.faults.fire("activate", "lifecycle activate")

    def deactivate(self) -> None:
        self.hold("lifecycle deactivate")
        self.faults.fire("deactivate", "lifecycle deactivate: holding")

    def add_listener(self, fn: Callable[[ArmObservation], None]) -> None:
        self._listeners.append(fn)

    @property
    def observation(self) -> ArmObservation | None:
        return self._obs

    @property
    def state(self) -> ArmState:
        return self.faults.state

    # ------------------------------------------------------------------ commands
    def submit(
        self,
        action: ArmAction,
        wall_stamp: float | None = None,
        source: str = "command",
        via: Sequence[np.ndarray] = (),
    ) -> SafeAction | Rejection:
        """Check a command now and make it the goal the loop tracks; a rejection clears the goal
        (hold). ``via``: joint waypoints to go on to once there (``Goal.via``; homing)."""
        verdict = self._admit(action, wall_stamp, source, via)
        if isinstance(verdict, Rejection):
            return self.refuse(verdict)
        self.counters["commands"] += 1
        return verdict

    def refuse(self, rejection: Rejection) -> Rejection:
        """Count a refused command and drop the goal it would have replaced, so the arm brakes and
        holds instead of chasing an older one. Also for refusals decided before ``submit`` (a ROS
        message whose names or frame are wrong): every bad command has the same effect."""
        if rejection.reason not in ("not_active", "homing", "before_hold"):
            self.slot.clear(f"rejected_{rejection.reason}")
        self.counters["rejected"] += 1
        self.counters[f"rejected_{rejection.reason}"] += 1
        self.counters["commands"] += 1  # last: whoever sees it counted sees what it did
        log.debug("command rejected (%s): %s", rejection.reason, rejection.detail)
        return rejection

    def _admit(
        self, action: ArmAction, wall_stamp: float | None, source: str, via: Sequence[np.ndarray] = ()
    ) -> SafeAction | Rejection:
        state = self.faults.state
        if state is not ArmState.ACTIVE:
            return Rejection("not_active", f"the arm is {state.value}")
        now_m, now_w = time.monotonic(), time.time()
        wall_stamp = now_w if wall_stamp is None else float(wall_stamp)
        age = now_w - wall_stamp
        if not math.isfinite(age) or age < -_FUTURE_STAMP_S:
            return Rejection("bad_stamp", f"command stamped {-age:.3f} s in the future")
        if wall_stamp <= self._stop_wall:
            return Rejection("before_stop", "command was issued before the last stop")
        if wall_stamp <= self._hold_wall:
            return Rejection("before_hold", "command was issued before the last hold")
        stamp = now_m - max(age, 0.0)
        if not self.watchdog.is_fresh(stamp, now_m):
            return Rejection(
                "stale", f"command is {age * 1e3:.0f} ms old (deadman {self.config.deadman_ms:g} ms)"
            )
        if source != "home" and self.slot.homing():
            return Rejection("homing", "the arm is homing; wait for it to finish")
        obs = self._obs
        if obs is None:  # ACTIVE implies a reading; a defensive check costs nothing
            return Rejection("not_active", "no state read from the arm yet")
        safe = self.resolver.check(action, obs.q_d, obs.gripper_width)
        if isinstance(safe, Rejection):
            return safe
        goal_action = (
            action if action.mode in ABSOLUTE_MODES else ArmAction(safe.mode, safe.target, safe.gripper)
        )
        goal = Goal(
            goal_action,
            stamp,
            wall_stamp,
            self.estop.generation,
            expires=source != "home",
            source=source,
            one_shot=action.mode not in ABSOLUTE_MODES,
            via=[np.asarray(w, np.float64) for w in via],
        )
        self.watchdog.feed(stamp)
        self.slot.put(goal)
        return safe

    def home(self, timeout_s: float = 30.0) -> tuple[bool, str]:
        """Track the home pose through the safety filter; returns once there (or why not).

        The way home goes around the workspace box where the straight joint path leaves it
        (``safety.homing``: a few straight segments); an arm it cannot free is refused, naming
        where it is.

        Homing is how an operator or a learner gets the arm back to a known pose, so a homing that
        the filter stopped mid-way (a step refused from where the arm was commanded at that tick:
        logged with the commanded and measured joints), or that a reflex ended and the fault
        handler recovered from (``auto_recover``), is tried again from where the arm is then, up to
        ``HOME_TRIES`` times in all (``home_retried``; each try has ``timeout_s``). Repeated
        reflexes latch the arm (the fault machine), which ends the retries."""
        ok, why = self._home_once(timeout_s)
        tries = [why]
        while not ok and len(tries) < HOME_TRIES and self._home_retryable():
            log.warning("home: %s; trying again from where the arm is now", why)
            self.counters["home_retried"] += 1
            ok, why = self._home_once(timeout_s)
            tries.append(why)
        if len(tries) > 1:
            why = f"{why} (after {len(tries) - 1} earlier tries: {'; '.join(tries[:-1])})"
        return ok, why

    def _home_retryable(self) -> bool:
        """Whether the last homing ended in a way worth another try: refused mid-way with the arm
        ACTIVE, or by a reflex the fault handler recovers from within a few seconds."""
        outcome = self.slot.home_outcome
        if outcome.startswith("rejected_"):
            return self.state is ArmState.ACTIVE
        if outcome != "reflex" or not self.config.auto_recover:
            return False
        deadline = time.monotonic() + _RECOVERED_WITHIN_S
        while time.monotonic() < deadline:
            if self.state is ArmState.ACTIVE:
                return True
            if self.state is ArmState.LATCHED:
                return False
            time.sleep(0.05)
        return False

    def _home_once(self, timeout_s: float) -> tuple[bool, str]:
        self.slot.expect_home()
        path = self._way_home()
        if isinstance(path, Rejection):
            return False, f"home refused ({path.reason}): {path.detail}"
        verdict = self.submit(ArmAction("joint_position", path[0]), source="home", via=path[1:])
        if isinstance(verdict, Rejection):
            return False, f"home refused ({verdict.reason}): {verdict.detail}"
        if not self.slot.wait_home(timeout_s):
            r = self._obs
            where = (
                f"max |q - home| {np.max(np.abs(r.q - self._home_q)):.4f} rad "
                f"(joint {int(np.argmax(np.abs(r.q - self._home_q))) + 1}), "
                f"|q_d - home| {np.max(np.abs(r.q_d - self._home_q)):.2e}"
                if r is not None
                else "no state"
            )
            return False, (
                f"home not reached within {timeout_s:g} s (state {self.state.value}; {where}, "
                f"tolerance {self.config.home_tolerance:g}; motion running: {self.servo.running})"
            )
        if self.slot.home_outcome != "homed":
            return (
                False,
                f"homing ended before home ({self.slot.home_outcome}); the arm is {self.state.value}",
            )
        return True, "at home"

    def _rehome(self) -> None:
        """After an automatic recovery (``rehome_on_recover``): home, without a caller waiting.

        The control loop calls this, and planning the way home takes 0.02-0.2 s (longer from far
        postures), so the plan is made on a thread of its own, as a ``home`` service call's is;
        a recovery while one is still planning adds none."""
        if not self._rehoming.acquire(blocking=False):
            return

        def plan_and_go() -> None:
            try:
                self.slot.expect_home()
                path = self._way_home()
                if isinstance(path, Rejection):
                    log.error("rehome after recovery refused: %s", path.detail)
                    return
                verdict = self.submit(ArmAction("joint_position", path[0]), source="home", via=path[1:])
                if isinstance(verdict, Rejection):
                    log.error("rehome after recovery refused: %s", verdict.detail)
            finally:
                self._rehoming.release()

        threading.Thread(target=plan_and_go, name="franka-rehome", daemon=True).start()

    def _way_home(self) -> list[np.ndarray] | Rejection:
        """Waypoints from the commanded position home inside the workspace box (``safety.homing``)."""
        obs = self._obs
        if obs is None:
            return Rejection("not_active", "no state read from the arm yet")
        try:
            return plan_home(self.safety.limits, obs.q_d, self._home_q)
        except NoWayHome as e:
            return Rejection("workspace", str(e))

    def reset(self, timeout_s: float = 10.0) -> tuple[bool, str]:
        """Operator reset: clears the e-stop and a LATCHED fault, recovering the controller if needed."""
        return self._in_loop(self.recovery.reset, timeout_s)

    def recover(self, timeout_s: float = 10.0) -> tuple[bool, str]:
        """Manual recovery from REFLEX (LATCHED and ESTOP need ``reset``)."""
        return self._in_loop(self.recovery.recover, timeout_s)

    def hold(
        self, reason: str = "hold requested", timeout_s: float = 2.0, wait: bool = True
    ) -> tuple[bool, str]:
        """Stop smoothly and stay: the running motion is taken over by one that ends where it can
        stop without reversing (``Servo.brake``), the goal is dropped, and commands issued before
        now are refused. Not latching: the next fresh command moves the arm again. Deadman trips and
        lease loss upstream (the bridge) end here. ``wait=False`` returns once the goal is dropped
        and the brake is queued for the control loop (for callers that must not block)."""
        self._hold_wall = time.time()
        self.slot.clear("hold")
        self.counters["holds"] += 1
        log.info("hold: %s", reason)
        if not wait and self._loop.running and not self._loop.in_loop():
            self._loop.submit(self.tracker.brake_now)
            return True, "braking"
        return self._in_loop(self.tracker.brake_now, timeout_s)

    def stop(self, reason: str = "stop requested") -> None:
        """Latching e-stop: preempt the motion now, drop the goal, refuse commands until ``reset``."""
        self.estop.trigger(reason)
        self._stop_wall = time.time()
        self.faults.fire("estop", reason)
        self.slot.clear("estop")
        self.servo.stop()

    def set_dynamics_factor(self, factor: float) -> None:
        if not (isinstance(factor, (int, float)) and 0.0 < factor <= 1.0):
            raise ValueError(f"relative_dynamics_factor must be in (0, 1], got {factor!r}")

        def apply() -> tuple[bool, str]:
            self.link.set_dynamics_factor(float(factor))
            self.dynamics_factor = float(factor)
            self.runaway = RunawayGuard(self.safety.limits.joint_velocity_max, self.dynamics_factor)
            return True, "ok"

        self._in_loop(apply, 5.0)

    def diagnostics(self) -> dict[str, Any]:
        p50, p99 = self.periods.percentiles()
        l50, l99 = self.latency.percentiles()
        out: dict[str, Any] = {**self.faults.snapshot(), **self.counters}
        out.update({f"filter_{k}": v for k, v in self.safety.snapshot().items()})
        out.update({"overruns": self._loop.overruns, "tick_errors": self._loop.tick_errors})
        out["deferred_takeovers"] = getattr(self.link, "deferred_takeovers", 0)
        out.update(
            {
                "estop_latched": self.estop.latched,
                "estop_reason": self.estop.reason,
                "deadman_trips": self.watchdog.trips,
                "goal": goal.source if (goal := self.slot.goal) else "none",
                "control_rate_hz": self.config.control_rate_hz,
                "relative_dynamics_factor": self.dynamics_factor,
                "period_p50_ms": p50 * 1e3,
                "period_p99_ms": p99 * 1e3,
                "command_latency_p50_ms": l50 * 1e3,
                "command_latency_p99_ms": l99 * 1e3,
            }
        )
        if self.gripper is not None:
            out.update({"gripper_connected": self.gripper.connected, "gripper_width": self.gripper.width})
        return out

    # ------------------------------------------------------------------ the loop
    def _tick(self) -> None:
        if not self.link.connected:
            self.recovery.try_reconnect()
            return
        first = self._read()
        if first is None:
            return
        self._publish(first)
        state = self.faults.state
        if self.recovery.call(lambda: self._check_motion(first, state)) is not None:
            return
        if state is ArmState.REFLEX and self.config.auto_recover:
            self.recovery.recover_if_due()
        elif state is ArmState.ACTIVE:
            # Track from a fresh reading: the listeners above (ROS publishing) take time, and on a busy
            # machine a target stepped from the older commanded position can lie behind the motion,
            # which the planner then reverses to meet (5 mrad seen against a throttled franka-sim).
            reading = self._read()
            if reading is not None:
                self.tracker.track(reading)

    def _read(self) -> ArmReading | None:
        try:
            return self.link.read()
        except LinkLost as exc:
            self.recovery.on_link_lost(exc)
            return None

    def _check_motion(self, reading: ArmReading, state: ArmState) -> None:
        """Poll the running motion (raises its error), catch a reflex the poll did not raise, and
        stop a runaway motion (``RunawayGuard``) as a reflex."""
        self.servo.running = self.link.poll()
        if reading.mode == "Reflex" and state not in (ArmState.REFLEX, ArmState.RECOVERING):
            raise ReflexError("the controller reports robot mode Reflex")
        if state is ArmState.ACTIVE and (why := self.runaway.check(reading)) is not None:
            log.error("%s", why)
            self.counters["runaway_stopped"] += 1
            self.servo.stop()
            self.runaway.forget()
            raise ReflexError(why)

    def _publish(self, reading: ArmReading) -> None:
        if self._last_read_t is not None and self.faults.link_up:  # not across a lost link
            self.periods.add(reading.t - self._last_read_t)
        self._last_read_t = reading.t
        width = self.gripper.width if self.gripper is not None else math.nan
        obs = ArmObservation(
            reading.t,
            time.time(),
            reading.q,
            reading.dq,
            reading.q_d,
            tcp_pose(reading.q, self.safety.limits.tcp_offset),
            width,
            self.faults.state,
        )
        self._obs = obs
        for fn in self._listeners:
            try:
                fn(obs)
            except Exception:
                log.exception("state listener failed")

    # ------------------------------------------------------------------ operations run by the loop
    def _in_loop(self, fn: Callable[[], tuple[bool, str]], timeout_s: float) -> tuple[bool, str]:
        try:
            return self._loop.call(fn, timeout_s)
        except concurrent.futures.TimeoutError:
            return False, f"the control loop did not run the request within {timeout_s:g} s"
