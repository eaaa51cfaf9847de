"""Versioned wire protocol between learners and the robot PC (see docs/protocol.md).

A message is a ZeroMQ multipart: frame 0 is a msgpack header (a msgspec Struct tagged by
``type``), frames 1..N are raw array buffers referenced from the header. No pickle.
"""

from rlinf_robot.protocol.codec import DEFAULT_MAX_BYTES, MAX_HEADER_BYTES, decode, encode
from rlinf_robot.protocol.errors import ProtocolError
from rlinf_robot.protocol.messages import (
    COMMAND_NAMES,
    CONTROL_MODES,
    PROTOCOL_VERSION,
    ActionChunk,
    Command,
    Error,
    Heartbeat,
    Message,
    Observation,
    Status,
)

__all__ = [
    "COMMAND_NAMES",
    "CONTROL_MODES",
    "DEFAULT_MAX_BYTES",
    "MAX_HEADER_BYTES",
    "PROTOCOL_VERSION",
    "ActionChunk",
    "Command",
    "Error",
    "Heartbeat",
    "Message",
    "Observation",
    "ProtocolError",
    "Status",
    "decode",
    "encode",
]
