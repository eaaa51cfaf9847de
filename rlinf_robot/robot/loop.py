"""``PeriodicLoop``: one thread that ticks at a fixed rate and runs requests between ticks.

Hardware drivers want a single thread to own the device: requests from other threads (ROS
service callbacks, the bridge) are queued with ``call`` and executed by the loop between two ticks,
so nothing ever drives the device concurrently. Ticks are scheduled on absolute deadlines
(``t0 + k * period``), so short delays are caught up and the mean rate stays exact; a delay longer
than a full period is counted as an overrun and the schedule restarts from now.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from rlinf_robot.robot.sched import set_thread_priority

log = logging.getLogger(__name__)
T = TypeVar("T")


class PeriodicLoop:
    def __init__(
        self,
        rate_hz: float,
        tick: Callable[[], None],
        name: str = "periodic-loop",
        priority: int = 0,
        nice: int = 0,
    ):
        """``priority`` > 0 runs the loop thread SCHED_FIFO at that priority (if permitted): the loop
        sleeps most of each period, and a real-time slot keeps its rate on a loaded machine. Where
        that is not permitted (or ``priority`` is 0) the thread runs at ``nice`` if it may."""
        if not rate_hz > 0:
            raise ValueError(f"rate_hz must be positive, got {rate_hz}")
        self.priority = int(priority)
        self.nice = int(nice)
        self.period = 1.0 / rate_hz
        self._tick = tick
        self._name = name
        self._ops: queue.Queue = queue.Queue()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self.overruns = 0
        self.tick_errors = 0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def in_loop(self) -> bool:
        return threading.current_thread() is self._thread

    def start(self) -> None:
        self._halt.clear()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None

    def call(self, fn: Callable[[], T], timeout_s: float) -> T:
        """Run ``fn`` in the loop thread (directly if not running or already there); wait for it."""
        if not self.running or self.in_loop():
            return fn()
        return self.submit(fn).result(timeout=timeout_s)  # raises concurrent.futures.TimeoutError

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future:
        """Queue ``fn`` for the loop thread, between two ticks, without waiting for it."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._ops.put((fn, fut))
        return fut

    def _run(self) -> None:
        # Never inherit a policy from the thread that started us (see rlinf_robot.robot.sched).
        if not set_thread_priority(self.priority, self.nice) and self.priority > 0:
            log.warning(
                "%s: no permission for SCHED_FIFO %d; running with normal scheduling (nice %d)",
                self._name,
                self.priority,
                os.getpriority(os.PRIO_PROCESS, threading.get_native_id()),
            )
        next_t = time.monotonic()
        while not self._halt.is_set():
            self._run_ops()
            try:
                self._tick()
            except Exception:  # a bug must not silently kill the thread that drives the device
                log.exception("%s: tick failed", self._name)
                self.tick_errors += 1
            next_t += self.period
            now = time.monotonic()
            if next_t < now - self.period:
                self.overruns += 1
                next_t = now
            time.sleep(max(0.0, next_t - now))
        self._run_ops()  # answer whoever is still waiting

    def _run_ops(self) -> None:
        while True:
            try:
                fn, fut = self._ops.get_nowait()
            except queue.Empty:
                return
            try:
                fut.set_result(fn())
            except Exception as exc:
                fut.set_exception(exc)
