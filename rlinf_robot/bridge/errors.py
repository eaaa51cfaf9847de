"""Typed errors a learner sees from the bridge."""

from __future__ import annotations

from rlinf_robot.errors import LinkLost, RlinfRobotError


class BridgeError(RlinfRobotError):
    """The bridge could not be set up (bind/connect failed) or was used after close."""


class CommandRefused(BridgeError):
    """The robot answered a request with an ``Error`` message; ``code`` says why (``refused``,
    ``busy``, ``latched``, ``failed``, ...)."""

    def __init__(self, code: str, message: str, field: str = ""):
        self.code = code
        self.field = field
        super().__init__(f"[{code}] {message}" + (f" (field {field})" if field else ""))


class BridgeTimeout(LinkLost, TimeoutError):
    """Nothing arrived in time: no observation, no reply, or no heartbeat answer."""
