"""Who is on the other end of the bridge's ROUTER socket.

A client connects two DEALER sockets: its data socket (routing id = its client id) and a heartbeat
socket (the same id + ``HB_SUFFIX``) so heartbeats flow while the data socket is busy. Both map to
one client id; the lease belongs to the client, not to a socket.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

HB_SUFFIX = "#hb"  # routing-id suffix of a client's heartbeat socket
MAX_BACKLOG = 16  # replies kept for a peer that reads too slowly; older ones are lost (and counted)


@dataclass
class Peer:
    identity: bytes
    client_id: str
    key: str
    last_seen_ns: int
    subscribed: bool = False
    #: replies (encoded) its socket had no room for: sent before any further observation to it
    backlog: deque = field(default_factory=lambda: deque(maxlen=MAX_BACKLOG))


def is_heartbeat_socket(identity: bytes) -> bool:
    return identity.endswith(HB_SUFFIX.encode())


def client_id_of(identity: bytes) -> str:
    """Readable client id from a routing id (``name#hb`` -> ``name``)."""
    try:
        text = identity.decode("utf-8")
    except UnicodeDecodeError:
        return "peer-" + identity.hex()
    if not text.isprintable():
        return "peer-" + identity.hex()
    return text[: -len(HB_SUFFIX)] if text.endswith(HB_SUFFIX) else text
