"""``GripperWorker``: the Franka Hand on its own thread.

A gripper state read takes ~15-20 ms and a move blocks its server until done, far slower than the
arm's control tick, so the gripper never runs in the arm loop: this thread polls the width, issues
the newest wanted command when the previous one has finished, and reconnects after a lost link.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from typing import Any

from rlinf_robot.robot.franka.link import connect_gripper
from rlinf_robot.robot.sched import normal_scheduling

log = logging.getLogger(__name__)

#: A new move closer than this to the last one issued is the same command (m).
_SAME_WIDTH = 1e-3


class GripperWorker:
    def __init__(
        self,
        host: str,
        speed: float = 0.1,
        force: float = 20.0,
        poll_hz: float = 20.0,
        reconnect_period_s: float = 0.5,
    ):
        self.host = host
        self.speed = speed
        self.force = force
        self._period = 1.0 / poll_hz
        self._reconnect_period = reconnect_period_s
        self._lock = threading.Lock()
        self._wanted: tuple[str, float, float] | None = None  # (kind, width, force)
        self._issued: tuple[str, float, float] | None = None
        self._future = None
        self._gripper: Any = None  # franky.Gripper once connected
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.width = math.nan
        self.is_grasped = False
        self.connected = False
        self.counters: Counter[str] = Counter()

    def connect(self, timeout_s: float) -> None:
        """Connect once in the caller's thread (so ``connect`` errors surface), then poll in the background."""
        deadline = time.monotonic() + timeout_s
        while not self._try_connect():
            if time.monotonic() > deadline:
                raise ConnectionError(f"no Franka Hand answers at {self.host}")
            time.sleep(min(self._reconnect_period, 0.2))
        self._thread = threading.Thread(target=self._run, name="franka-gripper", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._gripper = None
        self.connected = False

    def move(self, width: float) -> None:
        with self._lock:
            self._wanted = ("move", float(width), 0.0)

    def grasp(self, width: float, force: float | None = None) -> None:
        with self._lock:
            self._wanted = ("grasp", float(width), float(self.force if force is None else force))

    # ------------------------------------------------------------------ thread
    def _try_connect(self) -> bool:
        try:
            self._gripper = connect_gripper(self.host)
            state = self._gripper.state
        except Exception as exc:
            log.debug("gripper connect failed: %s", exc)
            self._gripper = None
            return False
        self.width, self.is_grasped = float(state.width), bool(state.is_grasped)
        if not self.connected:
            self.counters["connects"] += 1
        self.connected = True
        self._future = None
        self._issued = None
        return True

    def _run(self) -> None:
        normal_scheduling()
        while not self._stop.is_set():
            if self._gripper is None:
                if not self._try_connect():
                    self._stop.wait(self._reconnect_period)
                    continue
            try:
                state = self._gripper.state
                self.width, self.is_grasped = float(state.width), bool(state.is_grasped)
                self._dispatch()
            except Exception as exc:
                log.warning("gripper link lost: %s", exc)
                self.counters["link_lost"] += 1
                self._gripper = None
                self.connected = False
                continue
            self._stop.wait(self._period)

    def _dispatch(self) -> None:
        if self._future is not None:
            if not self._future.wait(0.0):
                return  # the previous command is still running; the newest wish waits
            self.counters["done" if self._future.get() else "failed"] += 1
            self._future = None
        with self._lock:
            wanted = self._wanted
        if wanted is None or self._same(wanted, self._issued):
            return
        kind, width, force = wanted
        if kind == "move":
            self._future = self._gripper.move_async(width, self.speed)
        else:
            self._future = self._gripper.grasp_async(width, self.speed, force, 0.005, 0.1)
        self._issued = wanted
        self.counters[f"issued_{kind}"] += 1

    @staticmethod
    def _same(a, b) -> bool:
        return b is not None and a[0] == b[0] and abs(a[1] - b[1]) < _SAME_WIDTH and a[2] == b[2]
