"""Operators: processes that take the arm over mid-episode and hand it back (HIL-SERL style).

An operator binds two endpoints: it reads ``TeleopState`` on ``states`` and sends ``TeleopCommand``
on ``commands``; every ``RealEnvWorker`` started with ``teleop.states``/``teleop.commands``
connects to them (``rlinf_robot.teleop.link``). Three kinds:

- ``ScriptedOperator``: the task's scripted expert (``sim.mujoco.experts``, a function of the
  state) acting through the teleop path on a schedule - episodes ``every``-th from ``offset``,
  steps ``[start, stop)``. It answers every state it reads (engaged or not), so the env waits for
  its answer and the schedule is exact. The tests' and the benchmarks' stand-in for a person.
- ``KeyboardOperator`` (``pynput``) and ``SpaceMouseOperator`` (``pyspacemouse``): free-running
  devices at ``rate_hz``; the arm is the operator's while a key or button is held. Imported only
  when used; a clear error names the missing package.

Any other process can be an operator: it only has to speak ``rlinf_robot.teleop.messages``.

An operator that binds an address other than loopback needs ``curve`` (its secret certificate
and a directory of the arm workers' public keys, as the bridge's server keys): it then talks only
to workers whose keys are in that directory, and they know it is the operator.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
import zmq

from rlinf_robot.bridge.auth import ServerSecurity
from rlinf_robot.bridge.config import CurveServerKeys, is_loopback
from rlinf_robot.teleop.messages import TeleopCommand, TeleopState, decode, encode

log = logging.getLogger(__name__)


class Operator:
    """Binds ``states`` (SUB) and ``commands`` (PUB); ``serve`` answers states until stopped."""

    name = "operator"

    def __init__(self, states: str, commands: str, curve: CurveServerKeys | None = None):
        if curve is None and not (is_loopback(states) and is_loopback(commands)):
            raise ValueError(
                f"an operator bound off this machine ({states}, {commands}) needs CURVE keys "
                "(--curve-secret-file, --curve-authorized-dir): anyone could otherwise read the arm's "
                "state and impersonate it"
            )
        self._ctx: zmq.Context = zmq.Context.instance()
        self._security = ServerSecurity(self._ctx, curve) if curve is not None else None
        self._sub = self._ctx.socket(zmq.SUB)
        self._sub.setsockopt(zmq.LINGER, 0)
        self._sub.setsockopt(zmq.SUBSCRIBE, b"")
        self._pub = self._ctx.socket(zmq.PUB)
        self._pub.setsockopt(zmq.LINGER, 0)
        if self._security is not None:
            self._security.apply(self._sub)
            self._security.apply(self._pub)
        self._sub.bind(states)
        self._pub.bind(commands)
        #: the bound endpoints (``tcp://127.0.0.1:*`` picks free ports): what the envs connect to
        self.states = self._sub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.commands = self._pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.states_seen = 0
        self.engaged_sent = 0
        self.refusals: list[str] = []  # what envs said about this operator's commands
        self.last_state: TeleopState | None = None

    def serve(self, duration_s: float | None = None, stop: threading.Event | None = None) -> None:
        """Answer states until ``duration_s`` passes or ``stop`` is set (bounded either way by the
        caller; a device operator also sends between states, see ``tick``)."""
        end = None if duration_s is None else time.monotonic() + duration_s
        while (stop is None or not stop.is_set()) and (end is None or time.monotonic() < end):
            if self._sub.poll(self.poll_ms()):
                try:
                    msg = decode(self._sub.recv())
                except ValueError as e:
                    log.warning("operator: dropped a bad message (%s)", e)
                    continue
                if isinstance(msg, TeleopState):
                    self.states_seen += 1
                    self.last_state = msg
                    if msg.rejected:
                        self.refusals.append(msg.rejected)
                    cmd = self.answer(msg)
                    if cmd is not None:
                        self.send(cmd)
            cmd = self.tick()
            if cmd is not None:
                self.send(cmd)

    def send(self, cmd: TeleopCommand) -> None:
        self.engaged_sent += int(cmd.engaged)
        self._pub.send(encode(cmd))

    def poll_ms(self) -> int:
        return 100

    def answer(self, state: TeleopState) -> TeleopCommand | None:
        """The command answering ``state`` (None: send nothing)."""
        return None

    def tick(self) -> TeleopCommand | None:
        """A free-running device's command between states (None: send nothing)."""
        return None

    def close(self) -> None:
        self._sub.close(0)
        self._pub.close(0)
        if self._security is not None:
            self._security.stop()


@dataclass(frozen=True)
class Schedule:
    """When a scripted operator holds the arm: episodes ``offset``, ``offset + every``, ... and
    within them decisions ``start`` <= step < ``stop``."""

    every: int = 2
    offset: int = 0
    start: int = 5
    stop: int = 25

    def __post_init__(self):
        if self.every < 1 or not 0 <= self.offset < self.every or not 0 <= self.start < self.stop:
            raise ValueError(f"bad schedule {self}: every >= 1, 0 <= offset < every, 0 <= start < stop")

    def engaged(self, episode: int, step: int) -> bool:
        return episode % self.every == self.offset and self.start <= step < self.stop

    @classmethod
    def parse(cls, every: int, steps: str, offset: int = 0) -> Schedule:
        """``steps`` as ``start:stop``."""
        try:
            start, stop = (int(x) for x in steps.split(":"))
        except ValueError:
            raise ValueError(f"steps must be start:stop (two integers), got {steps!r}") from None
        return cls(every=every, offset=offset, start=start, stop=stop)


class _StateLayout:
    """What the scripted experts read of an env (``env.obs_spec.state_slices()``): the state's
    column layout, as the published state names it."""

    def __init__(self, fields: dict[str, list[int]]):
        self._slices = {k: slice(a, b) for k, (a, b) in fields.items()}
        self.obs_spec = self

    def state_slices(self) -> dict[str, slice]:
        return self._slices


class ScriptedOperator(Operator):
    name = "scripted"

    def __init__(
        self,
        states: str,
        commands: str,
        schedule: Schedule,
        gain: float | None = None,
        curve: CurveServerKeys | None = None,
    ):
        super().__init__(states, commands, curve)
        self.schedule = schedule
        self.gain = gain
        self._experts: dict[str, object] = {}

    def answer(self, state: TeleopState) -> TeleopCommand:
        engaged = self.schedule.engaged(state.episode, state.step)
        action: list[float] = []
        if engaged:
            fn = self._expert(state.task)
            obs = {"state": np.asarray(state.state, np.float64)[None]}
            action = [float(x) for x in fn(_StateLayout(state.fields), obs)[0]]
        return TeleopCommand(
            engaged=engaged,
            action=action,
            operator=self.name,
            robot=state.robot,
            episode=state.episode,
            step=state.step,
            stamp_ns=time.time_ns(),
        )

    def _expert(self, task: str):
        if task not in self._experts:
            from sim.mujoco.experts import expert_for

            self._experts[task] = expert_for(f"mujoco/{task}", self.gain)
        return self._experts[task]


class _DeviceOperator(Operator):
    """A free-running device: ``read()`` -> (engaged, 6-vector in [-1, 1], gripper closed or not)
    at ``rate_hz``, scaled to the env's per-tick action units (``max_step`` m, ``max_rot`` rad)."""

    def __init__(
        self,
        states: str,
        commands: str,
        rate_hz: float = 20.0,
        max_step: float = 0.01,
        max_rot: float = 0.05,
        curve: CurveServerKeys | None = None,
    ):
        super().__init__(states, commands, curve)
        self.period = 1.0 / float(rate_hz)
        self.max_step, self.max_rot = float(max_step), float(max_rot)
        self._next = time.monotonic()
        self._was_engaged = False

    def poll_ms(self) -> int:
        return max(int((self._next - time.monotonic()) * 1000), 0)

    def read(self) -> tuple[bool, np.ndarray, bool]:
        raise NotImplementedError

    def tick(self) -> TeleopCommand | None:
        now = time.monotonic()
        if now < self._next or self.last_state is None:
            return None
        self._next = now + self.period
        engaged, axes, closed = self.read()
        if not engaged and not self._was_engaged:
            return None  # idle: the env's max_age handles a silent device as released
        self._was_engaged = engaged
        axes = np.clip(axes, -1.0, 1.0)
        action = [*(axes[:3] * self.max_step), *(axes[3:6] * self.max_rot)]
        if self.last_state.action_dim == 7:
            from rlinf_robot.robot.franka.model import GRIPPER_MAX_WIDTH

            action.append(0.0 if closed else GRIPPER_MAX_WIDTH)
        return TeleopCommand(
            engaged=engaged, action=[float(a) for a in action] if engaged else [], operator=self.name
        )


class KeyboardOperator(_DeviceOperator):
    """Hold space to take over; w/s, a/d, r/f move x, y, z; g toggles the gripper."""

    name = "keyboard"
    _AXES = {"w": (0, 1), "s": (0, -1), "a": (1, 1), "d": (1, -1), "r": (2, 1), "f": (2, -1)}

    def __init__(self, states: str, commands: str, **kw):
        try:
            from pynput import keyboard
        except ImportError as e:
            raise RuntimeError("the keyboard operator needs pynput (pip install pynput) and a display") from e
        super().__init__(states, commands, **kw)
        self._held: set[str] = set()
        self._closed = False

        def on_press(key):
            k = getattr(key, "char", None) or ("space" if key == keyboard.Key.space else "")
            if k == "g" and k not in self._held:
                self._closed = not self._closed
            self._held.add(k)

        def on_release(key):
            k = getattr(key, "char", None) or ("space" if key == keyboard.Key.space else "")
            self._held.discard(k)

        self._listener = keyboard.Listener(on_press=on_press, on_release=on_release)
        self._listener.start()

    def read(self) -> tuple[bool, np.ndarray, bool]:
        axes = np.zeros(6)
        for k, (i, sign) in self._AXES.items():
            if k in self._held:
                axes[i] += sign
        return "space" in self._held, axes, self._closed

    def close(self) -> None:
        self._listener.stop()
        super().close()


class SpaceMouseOperator(_DeviceOperator):
    """Hold the left button to take over; the right button toggles the gripper."""

    name = "spacemouse"

    def __init__(self, states: str, commands: str, **kw):
        try:
            import pyspacemouse
        except ImportError as e:
            raise RuntimeError("the spacemouse operator needs pyspacemouse (pip install pyspacemouse)") from e
        if not pyspacemouse.open():
            raise RuntimeError("no SpaceMouse found (pyspacemouse.open() failed)")
        super().__init__(states, commands, **kw)
        self._sm = pyspacemouse
        self._closed, self._right = False, False

    def read(self) -> tuple[bool, np.ndarray, bool]:
        s = self._sm.read()
        right = bool(s.buttons[1]) if len(s.buttons) > 1 else False
        if right and not self._right:
            self._closed = not self._closed
        self._right = right
        axes = np.array([s.x, s.y, s.z, s.roll, s.pitch, s.yaw], float)
        return bool(s.buttons[0]), axes, self._closed


OPERATORS = {"scripted": ScriptedOperator, "keyboard": KeyboardOperator, "spacemouse": SpaceMouseOperator}
