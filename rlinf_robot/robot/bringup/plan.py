"""From a launch YAML to the list of processes ``robot up`` starts — the same ones the launch files
name: the franka-sim service (``--sim`` only), then one installed executable per node block.

Every ``<node>: ros__parameters:`` block (``/**/<node>`` matches any namespace) names a node; its
executable is ``install/rlinf_ros/lib/rlinf_ros/<node>`` unless the registry below says otherwise,
and it gets the whole YAML as ``--params-file`` (exactly what launch_ros passes). Adding a node is
therefore one block in the YAML plus its console script in ``setup.py``; only lifecycle nodes (or
executables named differently from the node) need a registry line.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.bringup.ros_env import default_install_dir, executable
from rlinf_robot.robot.franka import sim_service

PACKAGE = "rlinf_ros"
SIM_MODULE = "rlinf_robot.robot.franka.sim_service"


@dataclass(frozen=True)
class NodeSpec:
    executable: str
    lifecycle: bool = False
    package: str = PACKAGE


#: node name -> how to start it. Nodes not listed run ``<package>/<node name>``, not lifecycle.
NODES: dict[str, NodeSpec] = {
    "franka_node": NodeSpec("franka_node", lifecycle=True),
    "camera_node": NodeSpec("camera_node"),
}
#: Node whose ``robot_ip`` parameter ``--robot-ip`` (launch argument ``robot_ip``) overrides.
ROBOT_IP_NODE = "franka_node"


@dataclass(frozen=True)
class ChildSpec:
    name: str
    argv: list[str]
    lifecycle: bool = False
    ready_line: str | None = None  # wait for this line on its output before starting the next child
    fqn: str = ""  # /namespace/name for ROS nodes
    env: dict[str, str] = field(default_factory=dict)


def node_blocks(config: Path) -> list[str]:
    """Node names in a launch YAML, in file order (the franka_sim block and ``/**`` excluded)."""
    try:
        raw = yaml.safe_load(Path(config).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read launch config {config}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{config}: expected a mapping of <node>: ros__parameters blocks")
    names = []
    for key, block in raw.items():
        name = str(key).rstrip("/").rsplit("/", 1)[-1]
        if name in ("**", sim_service.BLOCK):
            continue
        if not isinstance(block, dict) or "ros__parameters" not in block:
            raise ConfigError(f"{config}: block {key!r} has no ros__parameters")
        names.append(name)
    if not names:
        raise ConfigError(f"{config}: no node blocks")
    return names


def make_plan(
    config: str | Path,
    *,
    sim: bool,
    namespace: str = "franka",
    robot_ip: str | None = None,
    install_dir: Path | None = None,
) -> list[ChildSpec]:
    config = Path(config).resolve()
    install_dir = Path(install_dir or default_install_dir())
    ns = "/" + namespace.strip("/") if namespace.strip("/") else ""
    children: list[ChildSpec] = []
    blocks = node_blocks(config)  # first: a missing or unreadable file is a ConfigError, not a traceback
    if sim:
        sim_service.sim_options(config)  # validate now, not after the nodes started
        children.append(
            ChildSpec(
                "franka_sim",
                [sys.executable, "-m", SIM_MODULE, "--config", str(config)],
                ready_line=sim_service.READY_LINE,
            )
        )
    for name in blocks:
        spec = NODES.get(name, NodeSpec(name))
        exe = executable(spec.package, spec.executable, install_dir)
        if not exe.exists():
            raise ConfigError(f"{name}: executable {exe} not found; build the ROS workspace (make setup)")
        argv = [
            str(exe),
            "--ros-args",
            "-r",
            f"__node:={name}",
            "-r",
            f"__ns:={ns or '/'}",
            "--params-file",
            str(config),
        ]
        if robot_ip and name == ROBOT_IP_NODE:
            argv += ["-p", f"robot_ip:={robot_ip}"]
        children.append(ChildSpec(name, argv, lifecycle=spec.lifecycle, fqn=f"{ns}/{name}"))
    return children
