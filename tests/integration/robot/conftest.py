"""Fixtures for the robot-stack integration tests: `rlinf-robot robot up` as a real process, and a
separate rclpy probe node in the test process. Everything runs on loopback, in this session's ROS
domain, with bounded waits."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from rlinf_robot.paths import REPO_ROOT
from rlinf_robot.robot.sched import normal_scheduling
from tests.integration.robot.probe import RosProbe

INSTALL = REPO_ROOT / "ros_ws" / "install" / "rlinf_ros" / "lib" / "rlinf_ros"
SIM_CONFIG = REPO_ROOT / "launch" / "config" / "sim_robot.yaml"
_TMP = Path(tempfile.mkdtemp(prefix="rlinf-robot-tests-"))
os.environ.setdefault("ROS_LOG_DIR", str(_TMP / "ros_log"))
os.environ.setdefault("MESA_SHADER_CACHE_DIR", str(_TMP / "mesa"))


def require_ros_ws() -> None:
    assert (INSTALL / "franka_node").exists(), "ros_ws is not built: run `make setup`"


def derived_config(tmp_dir: Path, name: str, keep: set[str], edits: dict[str, dict] | None = None) -> Path:
    """sim_robot.yaml with only the blocks in ``keep`` (``franka_sim``, ``franka_node``, ...) and some
    parameters changed: ``{block: {param: value}}``. Other teams' nodes are left out on purpose:
    these tests are about the arm stack."""
    raw = yaml.safe_load(SIM_CONFIG.read_text())
    out = {}
    for key, block in raw.items():
        short = key.rstrip("/").rsplit("/", 1)[-1]
        if short in keep:
            block["ros__parameters"].update((edits or {}).get(short, {}))
            out[key] = block
    path = tmp_dir / name
    path.write_text(yaml.safe_dump(out, sort_keys=False))
    return path


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    normal_scheduling()  # this test process may have run franky (see rlinf_robot.robot.sched)


def descendants(pid: int) -> set[int]:
    """All live descendants of ``pid`` (from /proc/<pid>/task/*/children)."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(x) for x in (task / "children").read_text().split()]
            except OSError:
                continue
            for k in kids:
                if k not in found:
                    found.add(k)
                    todo.append(k)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class RobotUp:
    """`python -m rlinf_robot.cli robot up ...` with its output captured line by line."""

    def __init__(self, *args: str):
        require_ros_ws()
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlinf_robot.cli", "robot", "up", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_die_with_parent,  # a killed test run must not leave a stack holding the sim lock
        )
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            with self._cond:
                self.lines.append(raw.decode(errors="replace").rstrip())
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pattern: str, timeout: float, start: int = 0) -> re.Match:
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines[start:]:
                    m = rx.search(line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._pending()):
                    raise AssertionError(f"no line matching {pattern!r}; output:\n" + "\n".join(self.lines[-60:]))
                self._cond.wait(min(left, 0.2))

    def _pending(self) -> bool:
        return not self.proc.stdout.closed and self.proc.poll() is None

    def ready(self, timeout: float = 240.0) -> dict[str, int]:
        line = self.wait_for(r"robot up: ready: (.*)", timeout).group(1)
        return {name: int(pid) for name, pid in re.findall(r"(\w+) \(pid (\d+)\)", line)}

    def text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            raise AssertionError("robot up did not stop within {timeout} s:\n" + self.text()[-3000:]) from None


@pytest.fixture(scope="module")
def probe():
    p = RosProbe()
    yield p
    p.close()


@pytest.fixture
def tmp_config_dir(tmp_path) -> Path:
    return tmp_path
