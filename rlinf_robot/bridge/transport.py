"""Receiving and sending one multipart message on a ZeroMQ socket, with as little Python per frame
as the bridge's latency budget asks for.

pyzmq's ``recv_multipart`` asks the socket ``RCVMORE`` after every frame, and ``send_multipart``
type-checks every frame before sending any; a received frame already knows whether more follow
(``Frame.more``), and the frames the codec produces are all buffers. On a two-image observation this
is about a tenth of the learner's turn-around.
"""

from __future__ import annotations

from typing import cast

import zmq


def recv_frames(sock: zmq.Socket) -> list[zmq.Frame] | None:
    """The next whole message (zero-copy frames) if one is queued, else None; never blocks."""
    try:
        frame = sock.recv(zmq.NOBLOCK, copy=False)
    except zmq.Again:
        return None
    frames = [frame]
    while frame.more:  # the rest of a multipart message is delivered with its first frame
        frame = sock.recv(copy=False)
        frames.append(frame)
    return frames


def more_queued(sock: zmq.Socket) -> bool:
    """Whether another message can be received now (cheaper than a receive that fails)."""
    # EVENTS is an int option; pyzmq annotates every option's value as int | bytes
    return bool(cast(int, sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN)


def send_frames(sock: zmq.Socket, frames: list, flags: int = zmq.NOBLOCK) -> None:
    """Send ``frames`` (bytes or buffers) as one message, copying them (small messages, or large
    ones sent once: pyzmq's zero-copy path hands every frame's release to a collector thread,
    which costs more). Raises ``zmq.Again`` when the message cannot be queued."""
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        sock.send(frame, flags | (zmq.SNDMORE if i < last else 0), copy=True)
