"""Moved to ``rlinf_robot.robot.franka.model.forward_kinematics``; kept for tests/sim/test_control.py."""
from rlinf_robot.robot.franka.model import forward_kinematics as fr3_forward_kinematics  # noqa: F401
