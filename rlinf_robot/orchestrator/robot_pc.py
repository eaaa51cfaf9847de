"""The embedded default's robot PC: ``rlinf-robot robot up --sim`` started by the training job.

The job writes a copy of the launch YAML with its overrides (the franka-sim FR3 variant, node
parameters), the bridge on a free loopback port, and ``franka_node.home_q`` set to the task's
start pose (``rlinf_robot.envs.tasks.READY_Q``), so the arm homes to where the sim's episodes start.
The same executables and YAML a robot PC uses; only franka-sim stands in for the arm.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import yaml

from rlinf_robot.envs.tasks import READY_Q
from rlinf_robot.paths import REPO_ROOT
from rlinf_robot.robot.bringup.process import RobotUpProcess


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node(key: str) -> str:
    """``/**/franka_node`` -> ``franka_node`` (the blocks' keys are ROS parameter-file selectors)."""
    return key.strip("/").split("/")[-1]


def write_config(base: str | Path, overrides: dict[str, Any], dest: Path, endpoint: str) -> Path:
    """The robot PC's YAML: ``base`` with ``overrides`` ({node: {param: value}}) merged in."""
    base = Path(base)
    raw = yaml.safe_load((base if base.is_absolute() else REPO_ROOT / base).read_text())
    overrides = {k: dict(v or {}) for k, v in overrides.items()}
    unknown = sorted(set(overrides) - {_node(k) for k in raw})
    if unknown:
        from rlinf_robot.errors import ConfigError

        raise ConfigError(
            f"robot.overrides: no block {unknown} in {base}; blocks: {sorted(_node(k) for k in raw)}"
        )
    for key, block in raw.items():
        params = block.setdefault("ros__parameters", {})
        name = _node(key)
        if name == "franka_node":
            params.setdefault("home_q", READY_Q.tolist())
        if name == "bridge_node":
            params["endpoint"] = endpoint
        params.update(overrides.get(name, {}))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(raw, sort_keys=False))
    return dest


def start(
    base: str | Path, overrides: dict[str, Any], run_dir: Path, ready_timeout_s: float
) -> tuple[RobotUpProcess, str]:
    """Start the robot PC in the background; returns (process, bridge endpoint). ``wait_ready``
    on the process blocks until every node is up."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = write_config(base, overrides, run_dir / "robot_pc.yaml", endpoint)
    proc = RobotUpProcess("--sim", "--config", str(config), "--ready-timeout", str(int(ready_timeout_s)))
    return proc, endpoint
