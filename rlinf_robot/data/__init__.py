"""Recorded robot data on disk: episodes as LeRobot-format datasets (``lerobot_writer``,
``recorder``), and their replay in the sim twin (``replay``).

Learner side only: pyarrow and Pillow are imported by the modules here, never by the robot-PC
packages (``rlinf_robot.robot``, ``bridge``, ``safety``, ``protocol``). Import the submodules
directly: this package itself imports nothing heavy.
"""
