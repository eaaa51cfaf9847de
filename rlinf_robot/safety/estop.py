"""Latching emergency stop: set by ``trigger``, cleared only by an explicit ``reset``."""

from __future__ import annotations

import threading
import time

from rlinf_robot.errors import Latched


class EStop:
    """A new action never clears the latch; only an operator's ``reset`` does.

    ``generation`` increments on every trigger, so a command issued before a stop can be recognised
    (and dropped) even after the latch was reset.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latched = False
        self.reason = ""
        self.triggered_at: float | None = None
        self.generation = 0
        self.count = 0

    @property
    def latched(self) -> bool:
        with self._lock:
            return self._latched

    def trigger(self, reason: str = "stop") -> None:
        with self._lock:
            if not self._latched:
                self.count += 1
            self._latched = True
            self.reason = reason
            self.triggered_at = time.monotonic()
            self.generation += 1

    def reset(self) -> None:
        with self._lock:
            self._latched = False
            self.reason = ""

    def guard(self) -> None:
        """Raise ``Latched`` while the e-stop holds."""
        with self._lock:
            if self._latched:
                raise Latched(f"e-stop latched: {self.reason}")
