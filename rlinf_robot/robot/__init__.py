"""The arm side: a ``Robot`` interface, its implementations (``robot.franka``) and the registry
that builds them by name (``make_robot``).

Importing this package is light: franky, rclpy and MuJoCo are imported only by the modules (and
methods) that talk to the hardware, the ROS graph or the renderer.
"""

from rlinf_robot.robot.base import Feature, Robot
from rlinf_robot.robot.registry import make_robot, register_robot, robot_class, robot_names

__all__ = ["Feature", "Robot", "make_robot", "register_robot", "robot_class", "robot_names"]
