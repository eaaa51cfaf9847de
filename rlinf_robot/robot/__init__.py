"""The arm side: a ``Robot`` interface and its implementations (``robot.franka``).

Importing this package is light: franky, rclpy and MuJoCo are imported only by the modules (and
methods) that talk to the hardware, the ROS graph or the renderer.
"""

from rlinf_robot.robot.base import Feature, Robot

__all__ = ["Feature", "Robot"]
