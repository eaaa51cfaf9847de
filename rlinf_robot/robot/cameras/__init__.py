"""Cameras for the robot PC: a registry of sources that all return ``uint8[H, W, 3]`` RGB frames.

``sim`` renders the FR3 with MuJoCo at the arm's current joint positions (so the image follows
the franka-sim arm); ``opencv`` reads a real camera (or a video file) through OpenCV's
``VideoCapture``. Both import their heavy library only when opened.
"""

from rlinf_robot.robot.cameras.base import CAMERAS, Camera, make_camera, register_camera

__all__ = ["CAMERAS", "Camera", "make_camera", "register_camera"]
