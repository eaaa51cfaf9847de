"""Helpers every rlinf_ros node shares: the main loop, parameters, time stamps."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import rclpy
from builtin_interfaces.msg import Time
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.sched import normal_scheduling

#: Subscriptions to setpoints and sensor streams, where only the newest message counts. A node that
#: falls behind (a busy robot PC) then takes the freshest message; with a 10-deep queue it would take
#: the oldest, and at 50-200 Hz that one is already older than a 200 ms command deadman.
LATEST = QoSProfile(depth=1)


def run_node(factory: Callable[[], Node], args: list[str] | None = None) -> int:
    """Create the node, spin it until SIGINT/SIGTERM (rclpy handles both), then release it cleanly.

    One executor thread: every callback of our nodes is short, and services that wait for the arm
    run on ``side_services`` threads (rclpy's MultiThreadedExecutor falls behind at 200 Hz).

    Returns the process exit code: 1 when the node cannot even be built (bad parameters), so a
    supervisor (``ros2 launch``, ``rlinf-robot robot up``) reports a clear start-up failure.
    """
    logging.basicConfig(level=logging.INFO, format="[%(created).3f] [%(name)s] %(levelname)s: %(message)s")
    normal_scheduling()  # before rclpy/DDS create their threads (see rlinf_robot.robot.sched)
    rclpy.init(args=args if args is not None else sys.argv)
    executor = SingleThreadedExecutor()
    node = None
    code = 0
    try:
        node = factory()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        if node is not None and hasattr(node, "release"):
            node.release()
        executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return code


def declare(node: Node, defaults: dict[str, Any]) -> dict[str, Any]:
    """Declare parameters with dynamic typing (``200`` and ``200.0`` in YAML both work; the typed
    config validates them), and return their current values."""
    descriptor = ParameterDescriptor(dynamic_typing=True)
    for name, default in defaults.items():
        node.declare_parameter(name, list(default) if isinstance(default, tuple) else default, descriptor)
    return {name: _plain(node.get_parameter(name).value) for name in defaults}


def _plain(value: Any) -> Any:
    """rclpy returns arrays as ``array.array``; the configs want lists."""
    return list(value) if hasattr(value, "tolist") or type(value).__name__ == "array" else value


def to_stamp(t: float) -> Time:
    sec = int(t)
    return Time(sec=sec, nanosec=int((t - sec) * 1e9))


def from_stamp(stamp: Time) -> float | None:
    """Wall-clock seconds of a header stamp; ``None`` for an unset (zero) stamp."""
    if stamp.sec == 0 and stamp.nanosec == 0:
        return None
    return stamp.sec + stamp.nanosec * 1e-9
