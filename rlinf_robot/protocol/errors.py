"""The one error type a decoder raises for bad bytes."""

from __future__ import annotations

from rlinf_robot.errors import RlinfRobotError


class ProtocolError(RlinfRobotError, ValueError):
    """Malformed, truncated, oversized or unknown-version input.

    ``field`` names the offending header field (e.g. ``$.actions``) when one can be named, so the
    server can answer with an ``Error`` message that tells the client what to fix.
    """

    def __init__(self, message: str, field: str | None = None, code: str = "malformed"):
        self.field = field
        self.code = code
        super().__init__(message if field is None else f"{message} (field {field})")
