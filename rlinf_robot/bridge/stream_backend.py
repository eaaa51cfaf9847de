"""``StreamBackend``: an ``ArmBackend`` fed by streams of samples and emptied into command sinks.

This is the ROS-free core of ``bridge_node``: the node pushes every joint-state / EE-pose / camera
message in (``on_arm``, ``on_image``) and gives the backend callables that publish commands and
call services. Sensors are synchronised by *latest sample with a max age*: an observation uses the
newest sample of each sensor; a sensor whose newest sample is older than its max age is named in
``stale`` and its data is left out (a frozen camera is never silently repeated), and without a
fresh arm state nothing is applied at all.

The node's timer calls ``keepalive`` at the control rate: it republishes the current target
(freshly stamped) for up to ``target_hold_s`` after it was applied, so a downstream controller with
its own command deadman (franka_node) keeps tracking a target between chunk steps, and after a
chunk's last step until a lagging arm has reached it (a chunk moves the arm by its row sum; on
franka-sim at relative_dynamics_factor 0.2 the arm arrives up to ~1 s after a 50 Hz chunk ends).
The learner's deadman and every hold clear it, so a dead learner never keeps the arm moving.

The arm driver's state machine comes in as reports (``on_arm_state``: franka_node's /diagnostics,
stamped by the driver). They arrive at the driver's diagnostics rate (5 Hz), so right after a
``reset`` the newest report can still say ``ESTOP``: ``run_command`` therefore returns only once a
report stamped after the driver answered has arrived, and the bridge replies with the state the
arm is really in (a reply that said ``ESTOP`` while the next chunk was already refused, or
accepted, would be no answer at all).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from rlinf_robot.protocol import Observation
from rlinf_robot.safety import RobotState, SafeAction

log = logging.getLogger(__name__)
#: Driver states in which the arm takes no commands; the bridge reports them as its own state.
FAULT_STATES = frozenset({"REFLEX", "RECOVERING", "LATCHED", "ESTOP"})
#: An arm sample's value: joint positions, joint velocities, EE pose, gripper width.
_ArmValue = tuple[np.ndarray, np.ndarray, np.ndarray, float]
_V = TypeVar("_V")


@dataclass(frozen=True)
class CommandSinks:
    """Where commands go. ``joint_command(q[7], gripper_width | None)``, ``ee_command(pose[7])``,
    ``call(name) -> (ok, message)`` (blocking service call), ``stop()`` and ``hold()`` (must not
    block). ``hold`` asks the arm's driver to brake where it can: a target of "the current joints"
    would make a moving arm overshoot and drive back (see ``rlinf_robot.robot.franka.braking``)."""

    joint_command: Callable[[np.ndarray, float | None], None]
    ee_command: Callable[[np.ndarray], None]
    call: Callable[[str], tuple[bool, str]]
    stop: Callable[[], None]
    hold: Callable[[], None]


@dataclass(frozen=True)
class _Sample(Generic[_V]):
    value: _V
    mono: float  # time.monotonic() when it arrived
    wall_ns: int  # its own capture stamp (header), wall clock


class StreamBackend:
    ARM = "joint_states"

    def __init__(
        self,
        sinks: CommandSinks,
        cameras: Sequence[str] = (),
        state_max_age_s: float = 0.1,
        camera_max_age_s: float = 0.5,
        target_hold_s: float = 5.0,
        instruction: str = "",
        state_report_timeout_s: float = 2.0,
    ):
        self.sinks = sinks
        self.cameras = list(cameras)
        self.state_max_age_s = state_max_age_s
        self.camera_max_age_s = camera_max_age_s
        self.target_hold_s = target_hold_s
        self.instruction = instruction
        self.state_report_timeout_s = state_report_timeout_s
        self.arm_state: str | None = None  # REFLEX / RECOVERING / LATCHED / ESTOP as reported downstream
        self._state_stamp_ns = 0  # the driver's stamp (wall clock) of the newest state report
        self._lock = threading.Lock()
        self._state_cond = threading.Condition(self._lock)
        self._arm: _Sample[_ArmValue] | None = None
        self._images: dict[str, _Sample[np.ndarray]] = {}
        self._target: tuple[SafeAction, float] | None = None

    # -- streams in
    def on_arm(
        self, q: np.ndarray, dq: np.ndarray, ee_pose: np.ndarray, gripper_width: float, wall_ns: int
    ) -> None:
        sample = _Sample(
            (
                np.asarray(q, np.float64),
                np.asarray(dq, np.float64),
                np.asarray(ee_pose, np.float64),
                float(gripper_width),
            ),
            time.monotonic(),
            int(wall_ns),
        )
        with self._lock:
            self._arm = sample

    def on_arm_state(self, state: str, wall_ns: int) -> None:
        """The driver's state-machine state (``ACTIVE``, ``REFLEX``, ...) as of ``wall_ns``, its own
        stamp on the wall clock. A report older than the newest one is ignored."""
        with self._state_cond:
            if wall_ns < self._state_stamp_ns:
                return
            self.arm_state = state if state in FAULT_STATES else None
            self._state_stamp_ns = int(wall_ns)
            self._state_cond.notify_all()

    def on_image(self, camera: str, image: np.ndarray, wall_ns: int) -> None:
        with self._lock:
            self._images[camera] = _Sample(image, time.monotonic(), int(wall_ns))

    def _fresh_arm(self, now: float) -> _Sample[_ArmValue] | None:
        s = self._arm
        return s if s is not None and now - s.mono <= self.state_max_age_s else None

    # -- ArmBackend
    def state(self) -> RobotState | None:
        with self._lock:
            s = self._fresh_arm(time.monotonic())
        if s is None:
            return None
        q, _, ee, width = s.value
        return RobotState(joint_pos=q, ee_pose=ee, gripper_width=width)

    def observe(self) -> Observation | None:
        now = time.monotonic()
        with self._lock:
            arm, fresh = self._arm, self._fresh_arm(now)
            images = dict(self._images)
        if arm is None:
            return None  # nothing ever arrived: there is nothing to describe
        stale = [] if fresh is not None else [self.ARM]
        frames = {}
        for cam in self.cameras:
            s = images.get(cam)
            if s is None or now - s.mono > self.camera_max_age_s:
                stale.append(cam)
            else:
                frames[cam] = s.value
        q, dq, ee, width = arm.value
        captured = time.monotonic_ns() - int((now - arm.mono) * 1e9)
        return Observation(
            seq=0,
            stamp_ns=captured,
            joint_pos=q,
            joint_vel=dq,
            ee_pose=ee,
            gripper_width=width,
            images=frames,
            instruction=self.instruction,
            stale=stale,
            hops={"obs_captured": arm.wall_ns},
        )

    def apply(self, action: SafeAction) -> None:
        with self._lock:
            self._target = (action, time.monotonic())
            self._send(action)

    def _send(self, action: SafeAction) -> None:
        if action.mode == "joint_position":
            self.sinks.joint_command(action.target, action.gripper)
        else:
            self.sinks.ee_command(action.target)

    def keepalive(self) -> None:
        # Sent under the lock: a keepalive stamped after ``hold`` asked the arm to brake would be a
        # fresh command that moves it on.
        with self._lock:
            target = self._target
            if target is not None and time.monotonic() - target[1] <= self.target_hold_s:
                self._send(target[0])

    def hold(self) -> None:
        with self._lock:
            self._target = None  # keepalive stops re-sending the last step
        self.sinks.hold()

    def stop(self) -> None:
        with self._lock:
            self._target = None
        self.sinks.stop()

    def run_command(self, name: str, args: Mapping[str, object]) -> str:
        """Call the driver's service; once it answered, wait for a state report stamped after
        the answer, so ``fault_state`` tells what the command left behind (without reports at all,
        e.g. a driver that publishes none, there is nothing stale to wait out)."""
        with self._lock:
            self._target = None
            reporting = self._state_stamp_ns > 0
        ok, message = self.sinks.call(name)
        answered_ns = time.time_ns()
        if not ok:
            raise RuntimeError(message or f"{name} refused")
        if reporting and not self._wait_state_report(answered_ns):
            raise RuntimeError(
                f"{name}: the arm answered ({message}) but sent no state report within "
                f"{self.state_report_timeout_s:g} s; its state is unknown"
            )
        return message

    def _wait_state_report(self, after_ns: int) -> bool:
        with self._state_cond:
            return self._state_cond.wait_for(
                lambda: self._state_stamp_ns >= after_ns, self.state_report_timeout_s
            )

    def fault_state(self) -> str | None:
        return self.arm_state
