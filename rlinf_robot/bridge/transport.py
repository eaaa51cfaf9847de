"""Receiving and sending one multipart message on a ZeroMQ socket, with as little Python per frame
as the bridge's latency budget asks for.

pyzmq's ``recv_multipart`` asks the socket ``RCVMORE`` after every frame, and ``send_multipart``
type-checks every frame before sending any; a received frame already knows whether more follow
(``Frame.more``), and the frames the codec produces are all buffers. pyzmq's flag constants are
``enum.Flag`` members, and combining two costs about a microsecond of Python (``Flag.__or__``):
the flags are plain ints here. On a two-image observation this is about a tenth of the learner's
turn-around.
"""

from __future__ import annotations

import zmq

_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE = int(zmq.SNDMORE)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
#: the compiled ``send``: pyzmq's Python subclass only adds routing-id / group arguments (DRAFT
#: sockets) on top of it
_send = zmq.backend.Socket.send


def recv_frames(sock: zmq.Socket) -> list[zmq.Frame] | None:
    """The next whole message (zero-copy frames) if one is queued, else None; never blocks."""
    try:
        frame = sock.recv(_NOBLOCK, copy=False)
    except zmq.Again:
        return None
    frames = [frame]
    while frame.more:  # the rest of a multipart message is delivered with its first frame
        frame = sock.recv(copy=False)
        frames.append(frame)
    return frames


def more_queued(sock: zmq.Socket) -> bool:
    """Whether another message can be received now (cheaper than a receive that fails)."""
    return bool(sock.getsockopt(_EVENTS) & _POLLIN)  # type: ignore[operator]  # EVENTS is an int


def send_frames(sock: zmq.Socket, frames: list, flags: int = _NOBLOCK) -> None:
    """Send ``frames`` (bytes or buffers) as one message, copying them (small messages, or large
    ones sent once: pyzmq's zero-copy path hands every frame's release to a collector thread,
    which costs more). Raises ``zmq.Again`` when the message cannot be queued."""
    more = flags | _SNDMORE
    for frame in frames[:-1]:
        _send(sock, frame, more, True)
    _send(sock, frames[-1], flags, True)
