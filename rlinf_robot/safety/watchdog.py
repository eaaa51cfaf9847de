"""Deadman watchdog: no fresh command within ``timeout_ms`` means hold."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Watchdog:
    """Passive deadman timer. ``feed()`` on every valid command; ``expired()`` in the control loop.

    It starts expired: nothing moves until a first valid command arrives. ``trips`` counts the
    transitions from fresh to expired, so diagnostics show how often the link went quiet.
    """

    def __init__(self, timeout_ms: float, clock: Callable[[], float] = time.monotonic):
        if not timeout_ms > 0:
            raise ValueError(f"timeout_ms must be positive, got {timeout_ms}")
        self.timeout_s = timeout_ms / 1000.0
        self._clock = clock
        self._last: float | None = None
        self._was_fresh = False
        self.trips = 0
        self._lock = threading.Lock()

    def feed(self, stamp: float | None = None) -> None:
        with self._lock:
            self._last = self._clock() if stamp is None else stamp
            self._was_fresh = True

    def age_s(self, now: float | None = None) -> float:
        with self._lock:
            if self._last is None:
                return float("inf")
            return (self._clock() if now is None else now) - self._last

    def expired(self, now: float | None = None) -> bool:
        age = self.age_s(now)
        with self._lock:
            dead = age > self.timeout_s
            if dead and self._was_fresh:
                self._was_fresh = False
                self.trips += 1
            return dead

    def is_fresh(self, stamp: float, now: float | None = None) -> bool:
        """Whether a command stamped ``stamp`` (same clock) is still young enough to execute."""
        now = self._clock() if now is None else now
        return 0.0 <= now - stamp <= self.timeout_s

    def reset(self) -> None:
        with self._lock:
            self._last = None
            self._was_fresh = False
