"""``bridge_node``: the ZMQ bridge (``rlinf_robot.bridge.BridgeServer``) on top of ``franka_node``.

Subscribes ``joint_states`` / ``ee_pose`` and the camera ``image_raw`` topics (relative names, so
the launch namespace ``franka`` makes them ``/franka/...``), assembles observations by latest
sample with a max age (``StreamBackend``), and turns accepted chunk steps into ``joint_command`` /
``ee_command``, republished at ``control_rate_hz`` while a target is current. Deadman and lease loss
hold (current joints as the command); ``stop`` calls the ``stop`` service; ``home`` / ``reset`` /
``recover`` call theirs. Bridge state, counters and latency percentiles go to ``/diagnostics``.
The bridge itself runs its own I/O thread; this node only moves data between it and ROS.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_srvs.srv import Trigger

from rlinf_robot.bridge import BridgeError, BridgeServer, CurveServerKeys, ServerConfig
from rlinf_robot.bridge.stream_backend import CommandSinks, StreamBackend
from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.model import FINGER_JOINT_NAME, JOINT_NAMES
from rlinf_robot.safety import SafetyLimits
from rlinf_ros.common import LATEST, declare, from_stamp, run_node, to_stamp

PARAMS = {
    "endpoint": "tcp://127.0.0.1:5555",
    "deadman_ms": 100.0,
    "lease_timeout_ms": 1000.0,
    "obs_rate_hz": 30.0,
    "max_obs_age_ms": 1000.0,
    "curve_secret_file": "",  # the robot's .key_secret; "" = no CURVE (only allowed on loopback)
    "curve_authorized_dir": "",  # directory of allowed learner public keys (*.key)
    "allow_insecure": False,
    "control_rate_hz": 50.0,  # republish rate of the current target
    "target_hold_s": 5.0,
    "state_max_age_ms": 100.0,
    "camera_topics": ["front/image_raw"],  # camera name = first path component
    "camera_max_age_ms": 500.0,
    "instruction": "",
    "limits_file": "",
    "service_timeout_s": 60.0,
    "diagnostics_rate_hz": 1.0,
    "base_frame": "fr3_link0",
}


def _camera_name(topic: str) -> str:
    return topic.strip("/").split("/", 1)[0]


class BridgeNode(Node):
    def __init__(self) -> None:
        super().__init__("bridge_node")
        p = self.params = declare(self, PARAMS)
        cams = [t for t in p["camera_topics"] if t]
        self._cmd_js = self.create_publisher(JointState, "joint_command", 10)
        self._cmd_pose = self.create_publisher(PoseStamped, "ee_command", 10)
        self._diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._triggers = {
            name: self.create_client(Trigger, name) for name in ("home", "reset", "recover", "stop", "hold")
        }
        self.backend = StreamBackend(
            CommandSinks(self._joint_command, self._ee_command, self._call, self._stop, self._hold),
            cameras=[_camera_name(t) for t in cams],
            state_max_age_s=p["state_max_age_ms"] / 1e3,
            camera_max_age_s=p["camera_max_age_ms"] / 1e3,
            target_hold_s=float(p["target_hold_s"]),
            instruction=str(p["instruction"]),
        )
        self._pose: np.ndarray | None = None
        self.create_subscription(PoseStamped, "ee_pose", self._on_pose, LATEST)
        self.create_subscription(JointState, "joint_states", self._on_joints, LATEST)
        for topic in cams:
            camera = _camera_name(topic)
            self.create_subscription(Image, topic, lambda m, c=camera: self._on_image(c, m), LATEST)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        try:
            self.server = BridgeServer(self.backend, self._server_config(p), self._limits(p)).start()
        except BridgeError as exc:  # e.g. the port is taken: a clean start-up failure, not a traceback
            raise ConfigError(f"bridge_node: {exc}") from exc
        self.create_timer(1.0 / _positive(p, "control_rate_hz"), self.backend.keepalive)
        self.create_timer(1.0 / _positive(p, "diagnostics_rate_hz"), self._publish_diagnostics)
        self.get_logger().info(
            f"bridge on {self.server.endpoint} (CURVE {'on' if p['curve_secret_file'] else 'off'})"
        )

    @staticmethod
    def _server_config(p: dict) -> ServerConfig:
        curve = None
        if p["curve_secret_file"]:
            curve = CurveServerKeys(p["curve_secret_file"], p["curve_authorized_dir"])
        return ServerConfig(
            endpoint=p["endpoint"],
            deadman_ms=float(p["deadman_ms"]),
            lease_timeout_ms=float(p["lease_timeout_ms"]),
            obs_rate_hz=float(p["obs_rate_hz"]),
            max_obs_age_ms=float(p["max_obs_age_ms"]),
            curve=curve,
            allow_insecure=bool(p["allow_insecure"]),
            name="bridge_node",
        )

    @staticmethod
    def _limits(p: dict) -> SafetyLimits:
        return SafetyLimits.from_yaml(p["limits_file"]) if p["limits_file"] else SafetyLimits.from_yaml()

    # ------------------------------------------------------------------ streams in
    def _on_pose(self, msg: PoseStamped) -> None:
        q, o = msg.pose.position, msg.pose.orientation
        self._pose = np.array([q.x, q.y, q.z, o.w, o.x, o.y, o.z])

    def _on_joints(self, msg: JointState) -> None:
        pos = dict(zip(msg.name, msg.position, strict=False))
        vel = dict(zip(msg.name, msg.velocity, strict=False))
        if self._pose is None or not all(n in pos for n in JOINT_NAMES):
            return
        q = np.array([pos[n] for n in JOINT_NAMES])
        dq = np.array([vel.get(n, 0.0) for n in JOINT_NAMES])
        width = 2.0 * pos.get(FINGER_JOINT_NAME, 0.0)
        stamp = from_stamp(msg.header.stamp)
        self.backend.on_arm(q, dq, self._pose, width, int((stamp or time.time()) * 1e9))

    def _on_image(self, camera: str, msg: Image) -> None:
        if msg.encoding not in ("rgb8", "bgr8") or msg.height * msg.step != len(msg.data):
            self.get_logger().warning(
                f"{camera}: unsupported image ({msg.encoding})", throttle_duration_sec=5.0
            )
            return
        img = np.frombuffer(msg.data, np.uint8).reshape(msg.height, msg.step)[:, : msg.width * 3]
        img = img.reshape(msg.height, msg.width, 3)
        if msg.encoding == "bgr8":
            img = img[:, :, ::-1]
        stamp = from_stamp(msg.header.stamp)
        self.backend.on_image(camera, np.ascontiguousarray(img), int((stamp or time.time()) * 1e9))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        stamp = from_stamp(msg.header.stamp) or time.time()
        for status in msg.status:
            if "franka_node" in status.name:
                values = {kv.key: kv.value for kv in status.values}
                self.backend.on_arm_state(values.get("state", ""), int(stamp * 1e9))

    # ------------------------------------------------------------------ commands out
    def _joint_command(self, q: np.ndarray, gripper: float | None) -> None:
        msg = JointState()
        msg.header.stamp = to_stamp(time.time())
        msg.name = list(JOINT_NAMES)
        msg.position = [float(x) for x in q]
        if gripper is not None:
            msg.name.append(FINGER_JOINT_NAME)
            msg.position.append(float(gripper) / 2.0)
        self._cmd_js.publish(msg)

    def _ee_command(self, pose: np.ndarray) -> None:
        msg = PoseStamped()
        msg.header.stamp = to_stamp(time.time())
        msg.header.frame_id = self.params["base_frame"]
        p = msg.pose
        p.position.x, p.position.y, p.position.z = (float(v) for v in pose[:3])
        p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z = (float(v) for v in pose[3:])
        self._cmd_pose.publish(msg)

    def _call(self, name: str) -> tuple[bool, str]:
        """Blocking Trigger call (from the bridge's worker thread; the executor completes it)."""
        client = self._triggers[name]
        timeout = float(self.params["service_timeout_s"])
        if not client.wait_for_service(timeout_sec=min(timeout, 5.0)):
            return False, f"service {client.srv_name} not available"
        done = threading.Event()
        future = client.call_async(Trigger.Request())
        future.add_done_callback(lambda _: done.set())
        if not done.wait(timeout):
            return False, f"{client.srv_name} did not answer within {timeout:g} s"
        result = future.result()
        return bool(result.success), str(result.message)

    def _stop(self) -> None:
        self._triggers["stop"].call_async(Trigger.Request())  # do not wait: the e-stop latches anyway

    def _hold(self) -> None:
        self._triggers["hold"].call_async(Trigger.Request())  # do not wait: franka_node brakes in its loop

    # ------------------------------------------------------------------ diagnostics
    def _publish_diagnostics(self) -> None:
        if self.server is None:
            return
        st = self.server.status()
        level = {
            "ESTOP": DiagnosticStatus.ERROR,
            "LATCHED": DiagnosticStatus.ERROR,
            "LINK_LOST": DiagnosticStatus.WARN,
            "REFLEX": DiagnosticStatus.WARN,
        }.get(st.state, DiagnosticStatus.OK)
        values = [
            KeyValue(key="state", value=st.state),
            KeyValue(key="lease_holder", value=st.lease_holder),
            KeyValue(key="endpoint", value=self.server.endpoint),
        ]
        values += [KeyValue(key=k, value=str(v)) for k, v in sorted(st.counters.items())]
        for span, pct in st.latency_ms.items():
            values += [
                KeyValue(key=f"latency_{span}_{k}_ms", value=f"{v:.3f}")
                for k, v in pct.items()
                if k != "n" and math.isfinite(v)
            ]
        name = f"{self.get_namespace().rstrip('/')}/{self.get_name()}: bridge"
        msg = DiagnosticArray(
            status=[
                DiagnosticStatus(
                    level=level, name=name, message=st.state, hardware_id=self.server.endpoint, values=values
                )
            ]
        )
        msg.header.stamp = self.get_clock().now().to_msg()
        self._diag.publish(msg)

    def release(self) -> None:
        """Stop the bridge (the arm holds) before the node goes away (SIGINT/SIGTERM)."""
        server, self.server = getattr(self, "server", None), None
        if server is not None:
            server.stop()


def _positive(p: dict, key: str) -> float:
    value = p[key]
    if not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"bridge_node: {key} must be positive, got {value!r}")
    return float(value)


#: GIL switch interval (s). The bridge's I/O thread (observations out, chunks in, the deadman) shares
#: the interpreter with the executor thread, which converts 200 Hz joint states and camera frames: at
#: Python's default 5 ms a chunk could wait that long for the GIL before the bridge even saw it.
SWITCH_INTERVAL_S = 2e-4


def main(args=None) -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    # Fast DDS sends joint_command from the publishing thread (the bridge's I/O thread) instead of
    # handing each sample to its own writer thread, which a busy machine delays.
    os.environ.setdefault("RMW_FASTRTPS_PUBLICATION_MODE", "SYNCHRONOUS")
    # Every callback here is short; the blocking service calls happen on the bridge's worker thread.
    raise SystemExit(run_node(BridgeNode, args))


if __name__ == "__main__":
    main()
