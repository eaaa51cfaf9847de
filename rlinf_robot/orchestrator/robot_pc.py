"""The embedded default's robot PC: ``rlinf-robot robot up --sim`` started by the training job.

The job writes a copy of the launch YAML with its overrides (the franka-sim FR3 variant, node
parameters), the bridge on a free loopback port, and ``franka_node.home_q`` set to the task's
start pose (``rlinf_robot.envs.tasks.READY_Q``), so the arm homes to where the sim's episodes start.
The same executables and YAML a robot PC uses; only franka-sim stands in for the arm.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rlinf_robot.envs.tasks import READY_Q
from rlinf_robot.paths import REPO_ROOT
from rlinf_robot.robot.bringup.process import RobotUpProcess

if TYPE_CHECKING:
    from rlinf_robot.orchestrator.config import RobotConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node(key: str) -> str:
    """``/**/franka_node`` -> ``franka_node`` (the blocks' keys are ROS parameter-file selectors)."""
    return key.strip("/").split("/")[-1]


def write_config(
    base: str | Path, overrides: dict[str, Any], dest: Path, endpoint: str, cameras: bool = True
) -> Path:
    """The robot PC's YAML: ``base`` with ``overrides`` ({node: {param: value}}) merged in. Without
    ``cameras`` (a policy that reads no image) the camera node is left out and the bridge waits
    for no image: on the embedded default the robot PC shares the learner's CPUs, and rendering
    frames nobody reads took a fifth of a core."""
    base = Path(base)
    raw = yaml.safe_load((base if base.is_absolute() else REPO_ROOT / base).read_text())
    overrides = {k: dict(v or {}) for k, v in overrides.items()}
    if not cameras:
        raw = {k: v for k, v in raw.items() if _node(k) != "camera_node"}
        overrides.pop("camera_node", None)
        overrides.setdefault("bridge_node", {})["camera_topics"] = []
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


def prepare(robot: RobotConfig, run_dir: Path) -> tuple[Path, str]:
    """Write the robot PC's YAML for ``robot`` (a job's ``RobotConfig``: launch YAML, overrides,
    and the env whose cameras decide whether a camera node runs) into ``run_dir`` with a free
    loopback port for the bridge; returns (config path, bridge endpoint). Workers can be given the
    endpoint before it is up."""
    from rlinf_robot.envs.real import RealEnvConfig

    cameras = bool(RealEnvConfig.from_dict(dict(robot.env)).cameras)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    return write_config(robot.config, robot.overrides, run_dir / "robot_pc.yaml", endpoint, cameras), endpoint


def launch(config: Path, ready_timeout_s: float) -> RobotUpProcess:
    """Start ``robot up --sim`` on ``config`` in the background; ``wait_ready`` on the process
    blocks until every node is up."""
    return RobotUpProcess("--sim", "--config", str(config), "--ready-timeout", str(int(ready_timeout_s)))
