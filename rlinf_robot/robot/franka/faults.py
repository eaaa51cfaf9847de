"""``FaultStateMachine``: what the arm may do now, and why it changed.

IDLE -> ACTIVE -> REFLEX (franky raised a control/reflex error) -> RECOVERING
(``recover_from_errors``, re-home if configured) -> ACTIVE; ``max_faults`` faults (reflexes or
failed recoveries) within ``window_s`` -> LATCHED. LATCHED and ESTOP clear only by ``reset``.
DISCONNECTED covers a lost link to the controller; the driver reconnects by itself and resumes.

The machine is pure bookkeeping (no franky, no threads of its own): the transition table below is
the whole policy, every transition is logged with its cause and counted, so diagnostics can show
how often and why the arm stopped.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


class ArmState(str, enum.Enum):
    DISCONNECTED = "DISCONNECTED"
    IDLE = "IDLE"
    ACTIVE = "ACTIVE"
    REFLEX = "REFLEX"
    RECOVERING = "RECOVERING"
    LATCHED = "LATCHED"
    ESTOP = "ESTOP"


S = ArmState
#: Marker target: ACTIVE when enabled (lifecycle active), IDLE otherwise, DISCONNECTED without a link.
RESUME = "RESUME"
_RUNNING = (S.IDLE, S.ACTIVE, S.REFLEX, S.RECOVERING)

#: event -> {from state: to state}. An event not listed for the current state changes nothing.
TRANSITIONS: dict[str, dict[ArmState, object]] = {
    "connected": {S.DISCONNECTED: RESUME},
    "activate": {S.IDLE: S.ACTIVE},
    "deactivate": {S.ACTIVE: S.IDLE},
    "reflex": {S.IDLE: S.REFLEX, S.ACTIVE: S.REFLEX, S.RECOVERING: S.REFLEX},
    "recovering": {S.REFLEX: S.RECOVERING},
    "recovered": {S.RECOVERING: RESUME, S.REFLEX: RESUME},
    "recovery_failed": {S.RECOVERING: S.REFLEX},
    "link_lost": dict.fromkeys(_RUNNING, S.DISCONNECTED),
    "estop": dict.fromkeys(ArmState, S.ESTOP),
    "reset": {S.ESTOP: RESUME, S.LATCHED: RESUME},
}
#: Events that count as a fault towards the latch.
FAULT_EVENTS = ("reflex", "recovery_failed")


@dataclass(frozen=True)
class Transition:
    t: float
    event: str
    src: ArmState
    dst: ArmState
    cause: str


class FaultStateMachine:
    def __init__(
        self, max_faults: int = 3, window_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ):
        if max_faults < 1 or window_s <= 0:
            raise ValueError("max_faults must be >= 1 and window_s > 0")
        self.max_faults = max_faults
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.RLock()
        self._state = S.DISCONNECTED
        self.enabled = False  # lifecycle active: commands are wanted
        self.link_up = False
        self._faults: deque[float] = deque()
        self.counters: Counter[str] = Counter()
        self.history: deque[Transition] = deque(maxlen=64)
        self.last_cause = ""

    @property
    def state(self) -> ArmState:
        with self._lock:
            return self._state

    def fire(self, event: str, cause: str = "") -> ArmState:
        """Apply ``event``; returns the new state (unchanged if the event does not apply)."""
        if event not in TRANSITIONS:
            raise ValueError(f"unknown event {event!r}; known: {sorted(TRANSITIONS)}")
        with self._lock:
            self.counters[f"event_{event}"] += 1
            self._update_flags(event)
            src = self._state
            dst = TRANSITIONS[event].get(src)
            if dst is None:
                return src
            if dst == RESUME:
                dst = self._resume_state()
            assert isinstance(dst, ArmState)
            if event in FAULT_EVENTS and self._record_fault():
                dst = S.LATCHED
                cause = f"{cause} ({self.max_faults} faults within {self.window_s:g} s: latched)"
            if event == "reset":
                self._faults.clear()
            self._move(event, src, dst, cause)
            return dst

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {
                "state": self._state.value,
                "enabled": self.enabled,
                "link_up": self.link_up,
                "last_cause": self.last_cause,
                "recent_faults": len(self._faults),
                **self.counters,
            }

    # ------------------------------------------------------------------ internals
    def _update_flags(self, event: str) -> None:
        if event == "activate":
            self.enabled = True
        elif event == "deactivate":
            self.enabled = False
        elif event == "connected":
            self.link_up = True
        elif event == "link_lost":
            self.link_up = False

    def _resume_state(self) -> ArmState:
        if not self.link_up:
            return S.DISCONNECTED
        return S.ACTIVE if self.enabled else S.IDLE

    def _record_fault(self) -> bool:
        now = self._clock()
        self._faults.append(now)
        while self._faults and now - self._faults[0] > self.window_s:
            self._faults.popleft()
        return len(self._faults) >= self.max_faults

    def _move(self, event: str, src: ArmState, dst: ArmState, cause: str) -> None:
        self._state = dst
        self.last_cause = cause or event
        self.counters[f"{src.value}->{dst.value}"] += 1
        self.counters[f"enter_{dst.value}"] += 1
        self.history.append(Transition(self._clock(), event, src, dst, cause))
        level = logging.WARNING if dst in (S.REFLEX, S.LATCHED, S.ESTOP, S.DISCONNECTED) else logging.INFO
        log.log(level, "arm %s -> %s on %s: %s", src.value, dst.value, event, cause or "-")
