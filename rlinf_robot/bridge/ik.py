"""Moved to ``rlinf_robot.robot.franka.model`` (tcp_pose, solve_ik); kept for tests/bridge/test_real_env.py."""
from rlinf_robot.robot.franka.model import tcp_pose  # noqa: F401
