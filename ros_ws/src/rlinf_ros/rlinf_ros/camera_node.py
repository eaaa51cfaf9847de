"""``camera_node``: publishes ``<camera_name>/image_raw`` (sensor_msgs/Image, rgb8) at ``rate_hz``.

``mode: sim`` renders the FR3 with MuJoCo at the joint positions last received on
``joint_states_topic``, so the image follows the (franka-sim) arm; ``mode: opencv`` reads a real
camera through OpenCV ``VideoCapture`` (``device``: an index such as ``"0"``, a ``/dev/video*``
path, a video file or a URL). The camera itself is ``rlinf_robot.robot.cameras``; this is the
ROS wrapper. One thread does everything (OpenGL contexts are bound to the thread that made them).
"""

from __future__ import annotations

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.cameras import CAMERAS, make_camera
from rlinf_robot.robot.franka.model import FINGER_JOINT_NAME, JOINT_NAMES
from rlinf_ros.common import LATEST, declare, run_node, to_stamp

PARAMS = {
    "mode": "sim",
    "camera_name": "front",
    "rate_hz": 15.0,
    "frame_id": "camera_front",
    "width": 96,
    "height": 96,
    "device": "0",
    "joint_states_topic": "joint_states",
    "lookat": [0.35, 0.0, 0.3],
    "distance": 1.4,
    "azimuth": 145.0,
    "elevation": -25.0,
}
_SIM_VIEW = ("lookat", "distance", "azimuth", "elevation")


class CameraNode(Node):
    def __init__(self) -> None:
        super().__init__("camera_node")
        self.params = p = declare(self, PARAMS)
        if p["mode"] not in CAMERAS:
            raise ConfigError(f"camera_node: mode must be one of {sorted(CAMERAS)}, got {p['mode']!r}")
        if not (isinstance(p["rate_hz"], (int, float)) and 0 < p["rate_hz"] <= 120):
            raise ConfigError(f"camera_node: rate_hz must be in (0, 120], got {p['rate_hz']!r}")
        if p["mode"] == "sim":
            kwargs = {"width": p["width"], "height": p["height"], **{k: p[k] for k in _SIM_VIEW}}
        else:
            kwargs = {"device": str(p["device"]), "width": p["width"], "height": p["height"]}
        self.camera = make_camera(p["mode"], **kwargs)
        self._opened = False
        self._q: np.ndarray | None = None
        self.frames = 0
        self._pub = self.create_publisher(Image, f"{p['camera_name']}/image_raw", 5)
        if self.camera.needs_joint_positions:
            self.create_subscription(JointState, p["joint_states_topic"], self._on_joints, LATEST)
        self.create_timer(1.0 / float(p["rate_hz"]), self._capture)

    def _on_joints(self, msg: JointState) -> None:
        by_name = dict(zip(msg.name, msg.position, strict=False))
        if all(n in by_name for n in JOINT_NAMES):
            q = [by_name[n] for n in JOINT_NAMES]
            if FINGER_JOINT_NAME in by_name:
                q.append(by_name[FINGER_JOINT_NAME])
            self._q = np.array(q)

    def _capture(self) -> None:
        if not self._opened:  # opened here, in the executor thread that renders
            self.camera.open()
            self._opened = True
        if self.camera.needs_joint_positions and self._q is None:
            return  # no arm state yet: an image of a made-up pose would mislead
        frame = self.camera.read(self._q)
        msg = Image()
        msg.header.stamp = to_stamp(self.get_clock().now().nanoseconds * 1e-9)
        msg.header.frame_id = self.params["frame_id"]
        msg.height, msg.width = int(frame.shape[0]), int(frame.shape[1])
        msg.encoding, msg.is_bigendian, msg.step = "rgb8", 0, int(frame.shape[1]) * 3
        msg.data = np.ascontiguousarray(frame, dtype=np.uint8).tobytes()
        self._pub.publish(msg)
        self.frames += 1

    def release(self) -> None:
        if self._opened:
            self.camera.close()
            self._opened = False


def main(args=None) -> None:
    raise SystemExit(run_node(CameraNode, args))


if __name__ == "__main__":
    main()
