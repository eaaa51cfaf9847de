"""Start, watch, restart and stop the robot PC's processes.

Each child runs in its own session (a terminal's Ctrl-C reaches only ``robot up``, which then stops
the children in order) and gets ``PR_SET_PDEATHSIG``: if ``robot up`` itself is killed, the kernel
signals the children, so nothing is orphaned. Output is relayed line by line with a ``[name]``
prefix (like ``ros2 launch``), and the last lines are kept for error messages.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque

from rlinf_robot.robot.bringup.plan import ChildSpec
from rlinf_robot.robot.sched import normal_scheduling

_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)  # loaded before any fork
_PR_SET_PDEATHSIG = 1


#: A child killed by the stop signal itself this soon after its start was still loading (s).
STARTING_S = 5.0


class StartError(RuntimeError):
    """A child could not be started (or gave up restarting); the message says which and why."""


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    normal_scheduling()


class Child:
    def __init__(self, spec: ChildSpec, env: dict[str, str], out=None):
        self.spec = spec
        self.env = {**env, **spec.env}
        self.out = out or sys.stdout
        self.proc: subprocess.Popen | None = None
        self.tail: deque[str] = deque(maxlen=40)
        self.ready = threading.Event()
        self.restarts: deque[float] = deque()
        self._reader: threading.Thread | None = None
        self.started = 0.0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.ready.clear()
        if self.spec.ready_line is None:
            self.ready.set()
        self.started = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.spec.argv,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            raise StartError(f"{self.name}: cannot execute {self.spec.argv[0]}: {exc}") from exc
        self._reader = threading.Thread(
            target=self._relay, args=(self.proc,), name=f"relay-{self.name}", daemon=True
        )
        self._reader.start()

    def _relay(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None  # started with stdout=PIPE
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.tail.append(line)
            print(f"[{self.name}] {line}", file=self.out, flush=True)
            if self.spec.ready_line and self.spec.ready_line in line:
                self.ready.set()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def describe_exit(self) -> str:
        lines = "\n".join(f"    {line}" for line in list(self.tail)[-15:])
        return f"{self.name} exited with code {self.returncode()}" + (
            f"; its last output:\n{lines}" if lines else ""
        )

    def stop(self, timeout_s: float = 10.0, first: int = signal.SIGINT) -> str | None:
        """``first`` (SIGINT: a ROS node's clean shutdown; or SIGTERM), then SIGTERM, then SIGKILL,
        to the child's group.

        Returns ``None`` when the child stopped cleanly on the first signal with exit code 0 (or was
        not running), else what happened instead ("exit 1 on SIGINT", "needed SIGKILL", ...)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return None
        first = signal.Signals(first)
        steps = [(first, timeout_s)] + [
            (s, w) for s, w in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)) if s != first
        ]
        escalated = None
        for sig, wait in steps:
            if proc.poll() is not None:
                break
            if sig != first:
                escalated = sig.name
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        if self._reader is not None:
            self._reader.join(timeout=2.0)
        code = proc.poll()
        if code == -first and time.monotonic() - self.started < STARTING_S and escalated is None:
            # killed by the signal's default action: it came before the process (still loading
            # Python modules) had installed its handlers, so there was nothing to release yet
            print(f"robot up: {self.name} stopped while still starting", file=self.out, flush=True)
            return None
        if escalated is not None:
            return f"did not stop on {first.name} within {timeout_s:g} s, needed {escalated} (exit {code})"
        return None if code == 0 else f"exit {code} on {first.name}"


class Supervisor:
    def __init__(
        self,
        specs: list[ChildSpec],
        env: dict[str, str],
        max_restarts: int = 5,
        window_s: float = 60.0,
        out=None,
    ):
        self.children = [Child(s, env, out) for s in specs]
        self.max_restarts = max_restarts
        self.window_s = window_s

    def start_all(self, ready_timeout_s: float, should_stop=lambda: False) -> None:
        """Start the children in order; wait for each one's ready line before the next."""
        for child in self.children:
            child.start()
            deadline = time.monotonic() + ready_timeout_s
            while not child.ready.wait(0.1):
                if not child.alive():
                    raise StartError(f"{child.name} failed to start: {child.describe_exit()}")
                if should_stop():
                    raise StartError("interrupted during start-up")
                if time.monotonic() > deadline:
                    raise StartError(
                        f"{child.name} not ready after {ready_timeout_s:g} s "
                        f"(waiting for {child.spec.ready_line!r})"
                    )

    def check_alive(self) -> None:
        for child in self.children:
            if not child.alive():
                raise StartError(f"{child.name} failed during start-up: {child.describe_exit()}")

    def restart_crashed(self) -> list[Child]:
        """Restart every child that exited; ``StartError`` once one crashes too often."""
        restarted = []
        for child in self.children:
            if child.alive():
                continue
            now = time.monotonic()
            while child.restarts and now - child.restarts[0] > self.window_s:
                child.restarts.popleft()
            if len(child.restarts) >= self.max_restarts:
                raise StartError(
                    f"{child.name} crashed {self.max_restarts} times within {self.window_s:g} s; "
                    f"giving up. {child.describe_exit()}"
                )
            child.restarts.append(now)
            print(
                f"robot up: {child.describe_exit()}\nrobot up: restarting {child.name} "
                f"({len(child.restarts)}/{self.max_restarts})",
                file=child.out,
                flush=True,
            )
            child.start()
            restarted.append(child)
        return restarted

    def stop_all(self, first: int = signal.SIGINT) -> list[str]:
        """Stop the children in reverse start order (the bridge before the arm driver before
        franka-sim), each with ``first`` (``robot up`` passes on the signal it got); returns one
        ``"<name>: <what>"`` per child that did not stop cleanly."""
        unclean = []
        for child in reversed(self.children):
            what = child.stop(first=first)
            if what is not None:
                unclean.append(f"{child.name}: {what}")
        return unclean
