"""Helpers every rlinf_ros node shares: the main loop, parameters, time stamps."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import rclpy
from builtin_interfaces.msg import Time
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.sched import normal_scheduling

#: Subscriptions to setpoints and sensor streams, where only the newest message counts. A node that
#: falls behind (a busy robot PC) then takes the freshest message; with a 10-deep queue it would take
#: the oldest, and at 50-200 Hz that one is already older than a 200 ms command deadman.
LATEST = QoSProfile(depth=1)


def run_node(factory: Callable[[], Node], args: list[str] | None = None) -> int:
    """Create the node, spin it until SIGINT/SIGTERM, then stop it in order and return 0.

    The order is the point: the node is released first (``franka_node`` holds the arm and stops its
    control loop, ``bridge_node`` stops the bridge, ``camera_node`` closes its camera) while its ROS
    context still works, then the executor stops and the context is shut down. rclpy's own signal
    handlers shut the context down first, from inside the signal, so a thread of ours that publishes
    (the arm's control loop, the bridge's I/O thread) raised ``RCLError`` in the window before the
    release. So rclpy installs none here: a signal is turned into a future the executor waits on
    (``signal.set_wakeup_fd`` plus a thread that completes it, so the executor wakes at once even
    while it waits for DDS). A second signal during the stop is ignored.

    One executor thread: every callback of our nodes is short, and services that wait for the arm
    run on ``side_services`` threads (rclpy's MultiThreadedExecutor falls behind at 200 Hz).

    Returns the process exit code: 1 when the node cannot even be built (bad parameters), so a
    supervisor (``ros2 launch``, ``rlinf-robot robot up``) reports a clear start-up failure.
    """
    logging.basicConfig(level=logging.INFO, format="[%(created).3f] [%(name)s] %(levelname)s: %(message)s")
    normal_scheduling()  # before rclpy/DDS create their threads (see rlinf_robot.robot.sched)
    stop = _StopOnSignal()
    node = executor = None
    code = 0
    try:
        rclpy.init(
            args=args if args is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO
        )
        executor = SingleThreadedExecutor()
        node = factory()
        executor.add_node(node)
        executor.spin_until_future_complete(stop.future)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        try:
            if node is not None and hasattr(node, "release"):
                node.release()
            if executor is not None:
                executor.shutdown()
            if node is not None:
                node.destroy_node()
        finally:
            rclpy.try_shutdown()
            stop.close()
    return code


class _StopOnSignal:
    """SIGINT/SIGTERM -> ``future`` done (with the signal number), from a helper thread.

    Python runs a signal handler only when the main thread is back in the interpreter, and the main
    thread sits in the executor's wait; ``set_wakeup_fd`` writes the signal number to a pipe from
    the C-level handler at once, and the helper thread reading it completes the future, which wakes
    the executor. The Python-level handlers only keep SIGINT from raising ``KeyboardInterrupt`` in
    the middle of a callback and SIGTERM from ending the process without the release."""

    def __init__(self) -> None:
        self.future = Future()
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        self._previous_wakeup = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="stop-on-signal", daemon=True).start()
        import rlinf_ros

        if rlinf_ros.EARLY_SIGNALS:  # it came while the node's modules were still loading
            self._set(rlinf_ros.EARLY_SIGNALS[0])

    def _on_signal(self, signum, frame) -> None:
        self._set(signum)  # (the helper thread has normally done it already)

    def _watch(self) -> None:
        try:
            data = os.read(self._read_fd, 1)
        except OSError:
            return
        if data:
            self._set(data[0])

    def _set(self, signum: int) -> None:
        if not self.future.done():
            try:
                self.future.set_result(signum)
            except Exception:  # completed by the other path at the same moment
                pass

    def close(self) -> None:
        signal.set_wakeup_fd(self._previous_wakeup)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        for fd in (self._write_fd, self._read_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def declare(node: Node, defaults: dict[str, Any]) -> dict[str, Any]:
    """Declare parameters with dynamic typing (``200`` and ``200.0`` in YAML both work; the typed
    config validates them), and return their current values. An empty list in a parameter file
    has no type ROS can infer and arrives unset: a list parameter reads it as ``[]``."""
    descriptor = ParameterDescriptor(dynamic_typing=True)
    for name, default in defaults.items():
        node.declare_parameter(name, list(default) if isinstance(default, tuple) else default, descriptor)
    out = {name: _plain(node.get_parameter(name).value) for name in defaults}
    for name, default in defaults.items():
        if out[name] is None and isinstance(default, (list, tuple)):
            out[name] = []
    return out


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
