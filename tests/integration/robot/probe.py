"""A separate rclpy node the tests drive the robot stack with: it subscribes what the nodes
publish, publishes commands, and calls services — exactly what a user's node would do."""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from rlinf_robot.robot.franka.model import JOINT_NAMES

#: franka-sim's joint 7 (the wrist flange: tiny inertia under a stiff servo) chatters in a limit
#: cycle of ~0.08 rad/s around any target and rests ~1-2 mrad off it; joints 1-6 settle to < 0.3 mrad.
#: So joint 7 is held to this looser bound (it does not move the TCP position: the TCP is on its axis).
JOINT7_TOL = 3e-3


def within(q, target, tol: float) -> bool:
    err = np.abs(q - target)
    return bool(np.max(err[:6]) < tol and err[6] < max(tol, JOINT7_TOL))


def wait_until(cond, timeout: float, every: float = 0.02, action=None) -> bool:
    """Poll ``cond`` (running ``action`` first each round, e.g. re-publishing a command)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if action is not None:
            action()
        if cond():
            return True
        time.sleep(every)
    return False


class RosProbe:
    def __init__(self, namespace: str = "/franka", camera: str = "front"):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions
        from sensor_msgs.msg import Image, JointState

        self.ns = namespace
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("rlinf_test_probe", context=self.ctx)
        self.lock = threading.Lock()
        self.joint_states: deque = deque(maxlen=20000)  # (receive time, JointState)
        self.ee_pose = None
        self.diag: dict[str, str] = {}
        self.diag_count = 0
        self.images: deque = deque(maxlen=50)
        n = self.node
        n.create_subscription(JointState, f"{namespace}/joint_states", self._on_js, 100)
        n.create_subscription(PoseStamped, f"{namespace}/ee_pose", self._on_pose, 10)
        n.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 10)
        n.create_subscription(Image, f"{namespace}/{camera}/image_raw", self._on_image, 10)
        self.joint_pub = n.create_publisher(JointState, f"{namespace}/joint_command", 10)
        self.ee_pub = n.create_publisher(PoseStamped, f"{namespace}/ee_command", 10)
        self._JointState, self._PoseStamped = JointState, PoseStamped
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(n)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception:
            pass

    # ------------------------------------------------------------------ inputs
    def _on_js(self, msg) -> None:
        with self.lock:
            self.joint_states.append((time.monotonic(), msg))

    def _on_pose(self, msg) -> None:
        self.ee_pose = msg

    def _on_diag(self, msg) -> None:
        for status in msg.status:
            if status.name.startswith(f"{self.ns}/franka_node"):
                self.diag = {kv.key: kv.value for kv in status.values}
                self.diag_count += 1

    def _on_image(self, msg) -> None:
        self.images.append((time.monotonic(), msg))

    def q(self) -> np.ndarray | None:
        with self.lock:
            if not self.joint_states:
                return None
            msg = self.joint_states[-1][1]
        return np.array(msg.position[:7])

    def age(self) -> float:
        """Seconds since the last joint_states message arrived."""
        with self.lock:
            return time.monotonic() - self.joint_states[-1][0] if self.joint_states else float("inf")

    def ee(self) -> np.ndarray | None:
        m = self.ee_pose
        if m is None:
            return None
        p, o = m.pose.position, m.pose.orientation
        return np.array([p.x, p.y, p.z, o.w, o.x, o.y, o.z])

    def count(self, key: str) -> int:
        return int(float(self.diag.get(key, "0")))

    def state(self) -> str:
        return self.diag.get("state", "")

    def fresh_diag(self, timeout: float = 5.0) -> dict[str, str]:
        """Wait for the next diagnostics message (so counters read after an event are current)."""
        start = self.diag_count
        wait_until(lambda: self.diag_count >= start + 2, timeout)
        return self.diag

    # ------------------------------------------------------------------ outputs
    def stamp_now(self, offset_s: float = 0.0):
        from builtin_interfaces.msg import Time

        t = time.time() + offset_s
        return Time(sec=int(t), nanosec=int((t - int(t)) * 1e9))

    def send_joints(self, q, names=None, stamp_offset_s: float = 0.0) -> None:
        msg = self._JointState()
        msg.header.stamp = self.stamp_now(stamp_offset_s)
        msg.name = list(names or JOINT_NAMES)
        msg.position = [float(x) for x in q]
        self.joint_pub.publish(msg)

    def send_ee(self, pose, frame: str = "fr3_link0") -> None:
        msg = self._PoseStamped()
        msg.header.stamp = self.stamp_now()
        msg.header.frame_id = frame
        p, o = msg.pose.position, msg.pose.orientation
        p.x, p.y, p.z, o.w, o.x, o.y, o.z = (float(v) for v in pose)
        self.ee_pub.publish(msg)

    def trigger(self, service: str, timeout: float = 30.0):
        from std_srvs.srv import Trigger

        client = self.node.create_client(Trigger, f"{self.ns}/{service}")
        try:
            assert client.wait_for_service(timeout_sec=10.0), f"{service} service not found"
            return self._call(client, Trigger.Request(), timeout)
        finally:
            self.node.destroy_client(client)

    def set_param(self, node: str, name: str, value: float, timeout: float = 10.0):
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters

        client = self.node.create_client(SetParameters, f"{self.ns}/{node}/set_parameters")
        try:
            assert client.wait_for_service(timeout_sec=10.0)
            req = SetParameters.Request()
            req.parameters = [
                Parameter(
                    name=name,
                    value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=float(value)),
                )
            ]
            return self._call(client, req, timeout).results[0]
        finally:
            self.node.destroy_client(client)

    def _call(self, client, request, timeout: float):
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        assert done.wait(timeout), f"{client.srv_name} did not answer within {timeout} s"
        return future.result()

    def close(self) -> None:
        self.executor.shutdown()
        self._thread.join(timeout=5.0)
        self.node.destroy_node()
        self.ctx.try_shutdown()
