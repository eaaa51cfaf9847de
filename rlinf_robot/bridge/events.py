"""A bounded log of the server's decisions with their monotonic time stamps.

Tests and diagnostics read *when* the server did something from the server itself (e.g. the
deadman's hold time) instead of guessing from the outside; ``wait`` blocks on a condition with a
timeout, so nobody sleeps blindly.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Event:
    name: str
    t_ns: int  # time.monotonic_ns() when it happened
    detail: dict = field(default_factory=dict)


class EventLog:
    def __init__(self, maxlen: int = 4096):
        self._events: deque[Event] = deque(maxlen=maxlen)
        self._cond = threading.Condition()
        self._total = 0

    def add(self, name: str, t_ns: int | None = None, /, **detail) -> Event:
        ev = Event(name, time.monotonic_ns() if t_ns is None else t_ns, detail)
        with self._cond:
            self._events.append(ev)
            self._total += 1
            self._cond.notify_all()
        return ev

    def find(self, name: str, since_ns: int = 0) -> list[Event]:
        with self._cond:
            return [e for e in self._events if e.name == name and e.t_ns >= since_ns]

    def wait(self, name: str, timeout: float, since_ns: int = 0, count: int = 1) -> list[Event]:
        """Block until ``count`` events called ``name`` at or after ``since_ns``; returns them
        (fewer on timeout)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self._events if e.name == name and e.t_ns >= since_ns]
                left = deadline - time.monotonic()
                if len(found) >= count or left <= 0:
                    return found
                self._cond.wait(left)
