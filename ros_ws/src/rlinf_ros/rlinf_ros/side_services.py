"""Services that wait (``home``: up to 30 s for the arm) on a thread of their own.

A ROS service callback must return its response, so a service that waits for the arm blocks the
executor that runs it. On the node's own executor that would stall its timers, subscriptions and the
``stop`` service; rclpy's MultiThreadedExecutor (kilted, 9.1) is no way out: it re-submits queued
callbacks and busy-loops over them, so a node receiving 100-200 messages/s falls behind and drops
them (ros2/rclpy#1452). Instead each :class:`SideServices` is a sibling node in the same namespace
with one SingleThreadedExecutor on one daemon thread: its services have the names they would have
on the main node (``/franka/home``), run one at a time, and never block anything else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node


class SideServices:
    """A sibling node serving slow services on its own executor thread."""

    def __init__(self, parent: Node, suffix: str):
        # use_global_arguments=False: the command line's ``__node:=`` remap would rename this node
        # to the parent's name; the namespace is taken from the parent explicitly instead.
        self.node = Node(
            f"{parent.get_name()}_{suffix}",
            namespace=parent.get_namespace(),
            context=parent.context,
            use_global_arguments=False,
            start_parameter_services=False,
        )
        self._executor = SingleThreadedExecutor(context=parent.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=f"{suffix}-services", daemon=True)
        self._thread.start()

    def add(self, srv_type, name: str, handler: Callable) -> None:
        self.node.create_service(srv_type, name, handler)

    def _spin(self) -> None:
        try:
            self._executor.spin()
        except ExternalShutdownException:
            pass

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop spinning and destroy the node; a service still waiting on the arm is abandoned (its
        thread is a daemon and the arm is released by the caller)."""
        self._executor.shutdown(timeout_sec=timeout_s)
        self._thread.join(timeout=timeout_s)
        self.node.destroy_node()
