"""``RobotUpProcess``: ``rlinf-robot robot up ...`` as a child process, for drivers on the same
machine (the demo; a test harness) that need the whole robot PC up and then down again.

Output is read line by line on a thread (kept for reporting), readiness is the supervisor's own
ready line, and stopping is SIGINT (the supervisor then holds the arm and stops its nodes in
order). The child gets SIGTERM if this process dies, so a killed driver never leaves a stack
holding the franka-sim lock.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time

from rlinf_robot.robot.sched import normal_scheduling

READY = re.compile(r"robot up: ready: (.*)")


def _child_setup() -> None:
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    normal_scheduling()  # a driver that ran franky may be SCHED_FIFO (see rlinf_robot.robot.sched)


class RobotUpProcess:
    def __init__(self, *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()):
        """``prefix`` runs the supervisor through another command that execs it, e.g.
        ``("ip", "netns", "exec", "robot")`` to put the robot PC in a network namespace."""
        self.args = args
        self.lines: list[str] = []
        self._eof = False  # the reader saw the end of the output: every line is in ``lines``
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "rlinf_robot.cli", "robot", "up", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_child_setup,
            env=env,
        )
        threading.Thread(target=self._read, name="robot-up-output", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None  # started with stdout=PIPE
        for raw in self.proc.stdout:
            with self._cond:
                self.lines.append(raw.decode(errors="replace").rstrip())
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait_for(self, pattern: str | re.Pattern, timeout_s: float, start: int = 0) -> re.Match:
        """The first output line from index ``start`` on that matches ``pattern``, waiting up to
        ``timeout_s``; ``RuntimeError`` with the last output lines if it exits or time runs out."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for line in self.lines[start:]:
                    m = rx.search(line)
                    if m:
                        return m
                if self._eof and self.proc.poll() is not None:
                    raise RuntimeError(
                        f"robot up exited with {self.proc.returncode} before {rx.pattern!r}:\n{self.tail()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(
                        f"no {rx.pattern!r} from robot up within {timeout_s:g} s:\n{self.tail()}"
                    )
                self._cond.wait(min(left, 0.2))

    def ready(self) -> bool:
        """Whether the ready line came (without waiting); ``RuntimeError`` if it exited first."""
        with self._cond:
            if any(re.search(READY, line) for line in self.lines):
                return True
        if self.proc.poll() is not None:
            self.wait_ready(0.0)  # raises with the output's tail
        return False

    def wait_ready(self, timeout_s: float) -> dict[str, int]:
        """Block until the ready line; returns ``{process name: pid}``."""
        line = self.wait_for(READY, timeout_s).group(1)
        return {n: int(p) for n, p in re.findall(r"(\w+) \(pid (\d+)\)", line)}

    def text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def tail(self, n: int = 40) -> str:
        with self._cond:
            return "\n".join(self.lines[-n:])

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 60.0) -> int:
        """Send ``sig`` (SIGINT: an orderly stop), SIGKILL the whole group if it is not gone within
        ``timeout_s``; returns the exit code (negative: killed by that signal)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(timeout=10)

    def __enter__(self) -> RobotUpProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
