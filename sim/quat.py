"""Moved to ``rlinf_robot.rotations``; kept for sim/mujoco/env.py (HEAD) until its rewrite lands."""
from rlinf_robot.rotations import DOWN  # noqa: F401
