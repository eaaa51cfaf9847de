"""Bring-up of the robot PC's processes without ``ros2 launch``: ``rlinf-robot robot up``.

``plan`` turns a launch YAML into the processes to start (the same executables and parameter file
the launch files use), ``supervisor`` runs and restarts them, ``lifecycle`` configures and
activates lifecycle nodes over their ROS services.
"""
