"""rlinf-robot: train VLA policies in simulation and on a Franka arm, in one hybrid loop.

Importing this package is cheap on purpose: torch, Ray, MuJoCo, franky and rclpy are imported only
by the modules that need them, so the robot PC installs and starts light.
"""

__version__ = "0.1.0"
