"""Per-hop latency histograms from the wall-clock stamps every message carries.

A message's ``hops`` map records when it passed each hop (``obs_captured`` ... ``action_applied``).
The differences between consecutive hops locate where time goes: on the robot PC, on the wire, or
in the learner. Hops stamped on different machines include their clock offset (``downlink``,
``uplink``); the spans measured on one machine (``obs_to_action``, ``end_to_end``) do not.

Each histogram keeps the most recent ``window`` samples in a ring (exact percentiles of recent
behaviour, constant memory) plus an all-time count and maximum.
"""

from __future__ import annotations

import threading

import numpy as np

#: name -> (from hop, to hop). Order follows the path of one control cycle.
SPANS: dict[str, tuple[str, str]] = {
    "capture_to_send": ("obs_captured", "obs_sent"),
    "downlink": ("obs_sent", "obs_received"),
    "inference": ("obs_received", "action_sent"),
    "uplink": ("action_sent", "action_received"),
    "obs_to_action": ("obs_sent", "action_received"),
    "apply_delay": ("action_received", "action_applied"),
    "end_to_end": ("obs_captured", "action_applied"),
}
PERCENTILES = (50, 90, 99)


class LatencyHistogram:
    """Thread-safe rolling window of latency samples in milliseconds."""

    def __init__(self, window: int = 4096):
        self._buf = np.zeros(window, np.float64)
        self._n = 0
        self.count = 0
        self.max_ms = 0.0
        self._lock = threading.Lock()

    def record(self, ms: float) -> None:
        with self._lock:
            self._buf[self._n % self._buf.shape[0]] = ms
            self._n += 1
            self.count += 1
            self.max_ms = max(self.max_ms, ms)

    def samples(self) -> np.ndarray:
        """The window's samples, oldest first."""
        with self._lock:
            n, w = self._n, self._buf.shape[0]
            if n <= w:
                return self._buf[:n].copy()
            i = n % w
            return np.concatenate([self._buf[i:], self._buf[:i]])

    def summary(self) -> dict[str, float]:
        s = self.samples()
        if s.size == 0:
            return {}
        out = {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(s, PERCENTILES), strict=True)}
        out["max"] = float(s.max())
        out["n"] = float(self.count)
        return out


class HopLatencies:
    """One histogram per span of ``SPANS``; ``record(hops)`` adds every span the map covers."""

    def __init__(self, window: int = 4096):
        self._window = window
        self.spans = {name: LatencyHistogram(window) for name in SPANS}

    def clear(self) -> None:
        """Start every histogram afresh (a benchmark round; the object stays the one callers hold)."""
        self.spans = {name: LatencyHistogram(self._window) for name in SPANS}

    def record(self, hops: dict[str, int]) -> None:
        for name, (a, b) in SPANS.items():
            ta, tb = hops.get(a), hops.get(b)
            if ta is not None and tb is not None:
                self.spans[name].record((tb - ta) / 1e6)

    def summary(self) -> dict[str, dict[str, float]]:
        return {name: s for name, h in self.spans.items() if (s := h.summary())}
