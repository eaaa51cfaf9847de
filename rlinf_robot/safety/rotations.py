"""Moved to ``rlinf_robot.rotations``; kept for tests/sim/test_control.py."""
from rlinf_robot.rotations import quat_angle, quat_conjugate, quat_from_matrix, quat_multiply  # noqa: F401
