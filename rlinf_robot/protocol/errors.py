"""The one error type a decoder raises for bad bytes."""

from __future__ import annotations

from rlinf_robot.errors import RlinfRobotError


class ProtocolError(RlinfRobotError, ValueError):
    """Malformed, truncated, oversized or unknown-version input.

    ``field`` names the offending header field (e.g. ``$.actions``) when one can be named, so the
    server can answer with an ``Error`` message that tells the client what to fix; ``ref_seq`` is
    the message's ``seq`` when the header could be read that far (-1 otherwise), so the answer can
    be matched to the request.
    """

    def __init__(self, message: str, field: str | None = None, code: str = "malformed", ref_seq: int = -1):
        self.field = field
        self.code = code
        self.ref_seq = ref_seq
        super().__init__(message if field is None else f"{message} (field {field})")
