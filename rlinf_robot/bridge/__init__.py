"""ZeroMQ bridge between learners and the robot PC (see docs/protocol.md).

``BridgeServer`` runs on the robot PC (ROUTER: observations out, action chunks in, heartbeats,
lease, deadman, CURVE) on top of an ``ArmBackend``; ``BridgeClient`` is the learner's end (DEALER).
No ROS, torch or Ray here: the ROS wrapper is ``rlinf_ros.bridge_node``.
"""

from rlinf_robot.bridge.backend import ArmBackend, KinematicArm
from rlinf_robot.bridge.client import BridgeClient
from rlinf_robot.bridge.config import ClientConfig, CurveClientKeys, CurveServerKeys, ServerConfig
from rlinf_robot.bridge.errors import BridgeError, BridgeTimeout, CommandRefused
from rlinf_robot.bridge.server import BridgeServer

__all__ = [
    "ArmBackend",
    "BridgeClient",
    "BridgeError",
    "BridgeServer",
    "BridgeTimeout",
    "ClientConfig",
    "CommandRefused",
    "CurveClientKeys",
    "CurveServerKeys",
    "KinematicArm",
    "ServerConfig",
]
