"""Small, lock-protected ring buffers of timings (loop periods, command latencies) for diagnostics."""

from __future__ import annotations

import threading
from collections import deque

import numpy as np


class TimingStats:
    def __init__(self, maxlen: int = 2000):
        self._values: deque[float] = deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self.count = 0

    def add(self, value: float) -> None:
        with self._lock:
            self._values.append(value)
            self.count += 1

    def percentiles(self, qs=(50, 99)) -> tuple[float, ...]:
        with self._lock:
            if not self._values:
                return tuple(float("nan") for _ in qs)
            arr = np.fromiter(self._values, dtype=np.float64)
        return tuple(float(x) for x in np.percentile(arr, qs))

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
