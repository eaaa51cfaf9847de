"""Fixtures for the robot-stack integration tests: `rlinf-robot robot up` as a real process, and a
separate rclpy probe node in the test process. Everything runs on loopback, in this session's ROS
domain, with bounded waits."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import yaml

from rlinf_robot.paths import REPO_ROOT
from rlinf_robot.robot.bringup.process import RobotUpProcess
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


class RobotUp(RobotUpProcess):
    """`python -m rlinf_robot.cli robot up ...` with its output captured line by line."""

    def __init__(self, *args: str, prefix: tuple[str, ...] = ()):
        require_ros_ws()
        super().__init__(*args, prefix=prefix)

    def ready(self, timeout: float = 240.0) -> dict[str, int]:
        return self.wait_ready(timeout)


@pytest.fixture(scope="module")
def probe():
    p = RosProbe()
    yield p
    p.close()


@pytest.fixture
def tmp_config_dir(tmp_path) -> Path:
    return tmp_path
