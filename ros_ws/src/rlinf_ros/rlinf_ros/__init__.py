"""ROS 2 nodes of rlinf-robot. Each node is a thin wrapper: the logic lives in ``rlinf_robot``.

Run as a node executable, this package's import (the first thing the entry script loads, before
rclpy and the node's own imports, which take a second or more) already catches SIGINT/SIGTERM: a
signal that arrives while the node is still starting is kept in ``EARLY_SIGNALS`` and stops it
cleanly once ``rlinf_ros.common.run_node`` runs, instead of a ``KeyboardInterrupt`` traceback or
death by SIGTERM. Imported by anything else (tests, tools), it leaves signals alone.
"""

import os as _os
import signal as _signal
import sys as _sys

NODE_EXECUTABLES = ("franka_node", "camera_node", "bridge_node")
EARLY_SIGNALS: list[int] = []


def _early(signum, frame) -> None:
    EARLY_SIGNALS.append(signum)


if _sys.argv and _os.path.basename(_sys.argv[0]) in NODE_EXECUTABLES:
    for _sig in (_signal.SIGINT, _signal.SIGTERM):
        if _signal.getsignal(_sig) in (_signal.SIG_DFL, _signal.default_int_handler):
            _signal.signal(_sig, _early)
