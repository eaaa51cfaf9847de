"""ROS 2 nodes of rlinf-robot. Each node is a thin wrapper: the logic lives in ``rlinf_robot``."""
