"""An independent bridge client, written from docs/protocol.md alone: pyzmq + msgpack + numpy,
none of this project's code. The wire tests drive a real ``BridgeServer`` / ``bridge_node`` through
it, so what they check is the documented protocol, not our client library.

Messages come back as plain dicts (the msgpack header) with every array reference replaced by a
read-only numpy array over its payload frame.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable

import msgpack
import numpy as np
import zmq

ARRAY_KEYS = {"dtype", "shape", "frame"}
HB_SUFFIX = "#hb"


def pack(header: dict) -> bytes:
    return msgpack.packb(header, use_bin_type=True)


def frames_of(header: dict, arrays: dict[str, np.ndarray] | None = None) -> list[bytes]:
    """``header`` plus one payload frame per array (little-endian, C order), referenced by index."""
    header = dict(header)
    payload: list[bytes] = []
    for name, arr in (arrays or {}).items():
        a = np.ascontiguousarray(arr)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        payload.append(a.tobytes())
        header[name] = {"dtype": a.dtype.str, "shape": list(a.shape), "frame": len(payload)}
    return [pack(header), *payload]


def _arrays(value, frames: list[bytes]):
    """Replace array references by numpy arrays over their frames (recursively)."""
    if isinstance(value, dict):
        if set(value) == ARRAY_KEYS and isinstance(value["frame"], int):
            dt = np.dtype(value["dtype"])
            return np.frombuffer(frames[value["frame"]], dt).reshape(value["shape"])
        return {k: _arrays(v, frames) for k, v in value.items()}
    if isinstance(value, list):
        return [_arrays(v, frames) for v in value]
    return value


def parse(frames: list[bytes]) -> dict:
    header = msgpack.unpackb(frames[0], raw=False)
    return _arrays(header, frames)


def curve_keys(public_file, secret_file=None) -> tuple[bytes, bytes | None]:
    """(public, secret) Z85 keys from ``zmq.auth`` key files (what ``rlinf-robot keys`` writes)."""
    import zmq.auth

    return zmq.auth.load_certificate(str(secret_file or public_file))


class WireClient:
    """A DEALER with routing id ``client_id``; optionally a second DEALER ``<client_id>#hb`` that
    sends heartbeats from a thread every ``heartbeat_s`` (the doc's two-socket layout)."""

    def __init__(
        self,
        endpoint: str,
        client_id: str = "wire",
        curve: tuple[bytes, bytes, bytes] | None = None,  # (server public, client public, client secret)
        heartbeat_s: float | None = None,
    ):
        self.endpoint, self.client_id, self.curve = endpoint, client_id, curve
        self.ctx = zmq.Context()
        self.sock = self._socket(client_id)
        self.seq = itertools.count(1)
        self.inbox: deque[dict] = deque(maxlen=5000)  # everything received, oldest first
        self.heartbeat_errors: list[dict] = []
        self._stop = threading.Event()
        self._hb: threading.Thread | None = None
        if heartbeat_s is not None:
            self.start_heartbeats(heartbeat_s)

    def start_heartbeats(self, period_s: float = 0.02) -> None:
        """Heartbeats from a thread on the ``<id>#hb`` socket until ``stop_heartbeats``."""
        self.stop_heartbeats()
        self._stop = threading.Event()
        self._hb = threading.Thread(target=self._beat, args=(period_s, self._stop), daemon=True)
        self._hb.start()

    def stop_heartbeats(self) -> None:
        self._stop.set()
        if self._hb is not None:
            self._hb.join(5)
            self._hb = None

    def _socket(self, identity: str) -> zmq.Socket:
        s = self.ctx.socket(zmq.DEALER)
        s.linger = 0
        s.routing_id = identity.encode()
        if self.curve is not None:
            server_public, public, secret = self.curve
            s.curve_serverkey, s.curve_publickey, s.curve_secretkey = server_public, public, secret
        s.connect(self.endpoint)
        return s

    def _beat(self, period: float, stop: threading.Event) -> None:
        hb = self._socket(self.client_id + HB_SUFFIX)
        n = 0
        try:
            while not stop.is_set():
                n += 1
                hb.send(
                    pack(
                        {
                            "type": "heartbeat",
                            "v": 1,
                            "seq": n,
                            "stamp_ns": time.monotonic_ns(),
                            "sender": self.client_id,
                        }
                    )
                )
                while hb.poll(0):
                    msg = parse(hb.recv_multipart())
                    if msg["type"] == "error":
                        self.heartbeat_errors.append(msg)
                stop.wait(period)
        finally:
            hb.close(0)

    def close(self) -> None:
        self.stop_heartbeats()
        self.sock.close(0)
        self.ctx.term()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ out
    def send_frames(self, frames: list[bytes], timeout: float = 5.0) -> None:
        """Send, waiting up to ``timeout`` s for a connection; ``zmq.Again`` if there is none (a
        DEALER has no peer to queue for while a handshake fails, e.g. with a refused CURVE key)."""
        if not self.sock.poll(timeout * 1000.0, zmq.POLLOUT):
            raise zmq.Again(f"no connection to {self.endpoint} within {timeout:g} s")
        self.sock.send_multipart(frames, zmq.NOBLOCK)

    def send(self, header: dict, arrays: dict[str, np.ndarray] | None = None) -> int:
        """Send a message; ``seq`` is filled in unless given. Returns its seq."""
        header = {"v": 1, **header}
        header.setdefault("seq", next(self.seq))
        self.send_frames(frames_of(header, arrays))
        return header["seq"]

    def command(self, name: str, timeout: float = 10.0, **args) -> dict:
        """Send a command and return its answer (the ``status`` or ``error`` whose ref_seq matches)."""
        seq = self.send({"type": "command", "name": name, "args": args})
        return self.wait(
            lambda m: m["type"] in ("status", "error") and m.get("ref_seq") == seq,
            timeout,
            f"answer to {name} (seq {seq})",
        )

    def heartbeat(self, sender: str | None = None) -> int:
        return self.send(
            {
                "type": "heartbeat",
                "stamp_ns": time.monotonic_ns(),
                "sender": self.client_id if sender is None else sender,
            }
        )

    def chunk(self, actions: np.ndarray, mode: str, rate_hz: float, obs_seq: int, **fields) -> int:
        return self.send(
            {"type": "action_chunk", "obs_seq": obs_seq, "control_mode": mode, "rate_hz": rate_hz, **fields},
            {"actions": np.asarray(actions)},
        )

    # ------------------------------------------------------------------ in
    def pump(self, timeout: float = 0.0) -> None:
        """Receive whatever arrives within ``timeout`` s into ``inbox``."""
        if self.sock.poll(timeout * 1000.0):
            while True:
                try:
                    frames = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    return
                self.inbox.append(parse(frames))

    def wait(self, pred: Callable[[dict], bool], timeout: float, what: str = "a message") -> dict:
        """The first message in ``inbox`` (oldest first, then new ones) matching ``pred``; it is
        removed from the inbox. Raises AssertionError naming what came instead on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            for m in list(self.inbox):
                if pred(m):
                    self.inbox.remove(m)
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {what} within {timeout:g} s; {self.describe_inbox()}")
            self.pump(min(left, 0.05))

    def describe_inbox(self) -> str:
        """What a failed wait saw: the last 20 errors and statuses in full (they say why a chunk did
        not run), the last 12 messages in brief and the newest observation's chunk fields."""
        msgs = list(self.inbox)
        others = [m for m in msgs if m["type"] not in ("observation", "heartbeat")][-20:]
        last = [(m["type"], m.get("code") or m.get("state") or m.get("seq")) for m in msgs[-12:]]
        obs = [m for m in msgs if m["type"] == "observation"]
        chunk = {k: obs[-1].get(k) for k in ("seq", "chunk_seq", "chunk_report", "state")} if obs else None
        return f"last received: {last}; other than observations: {others}; newest observation: {chunk}"

    def maybe(self, pred: Callable[[dict], bool], timeout: float) -> dict | None:
        try:
            return self.wait(pred, timeout)
        except AssertionError:
            return None

    def observation(self, pred: Callable[[dict], bool] = lambda o: True, timeout: float = 10.0) -> dict:
        """The next observation matching ``pred`` (older observations in the inbox are discarded)."""
        obs = self.wait(lambda m: m["type"] == "observation" and pred(m), timeout, "observation")
        self.discard("observation", before_seq=obs["seq"])
        return obs

    def latest(self, timeout: float = 10.0) -> dict:
        """The newest observation received so far (waiting for one if there is none); older ones
        are discarded. What a chunk should be computed from."""
        self.pump(0)
        seqs = [m["seq"] for m in self.inbox if m["type"] == "observation"]
        if not seqs:
            return self.observation(timeout=timeout)
        return self.observation(lambda o: o["seq"] == max(seqs), timeout)

    def discard(self, msg_type: str, before_seq: int | None = None) -> None:
        for m in list(self.inbox):
            if m["type"] == msg_type and (before_seq is None or m["seq"] < before_seq):
                self.inbox.remove(m)

    def errors(self, ref_seq: int | None = None) -> list[dict]:
        self.pump(0)
        return [
            m for m in self.inbox if m["type"] == "error" and (ref_seq is None or m["ref_seq"] == ref_seq)
        ]


def zmtp_messages(stream: bytes) -> list[list[bytes]]:
    """The messages in one direction of a ZMTP 3 TCP stream with the NULL mechanism, as captured on
    the wire (RFC 23: a 64-byte greeting, then frames of ``flags``, a 1- or 8-byte size and the
    body; commands such as READY are skipped). A stream cut mid-frame ends at the last whole one."""
    assert stream[:1] == b"\xff" and stream[9:10] == b"\x7f", "not a ZMTP 3 greeting"
    mechanism = stream[12:32].rstrip(bytes(1))
    assert mechanism == b"NULL", f"mechanism {mechanism!r}: encrypted, not parsed"
    pos, messages, frames = 64, [], []
    while pos + 2 <= len(stream):
        flags = stream[pos]
        if flags & 0x02:  # long frame
            if pos + 9 > len(stream):
                break
            size, head = int.from_bytes(stream[pos + 1 : pos + 9], "big"), 9
        else:
            size, head = stream[pos + 1], 2
        if pos + head + size > len(stream):
            break
        body = stream[pos + head : pos + head + size]
        pos += head + size
        if flags & 0x04:  # a command frame (READY, PING, ...)
            continue
        frames.append(body)
        if not flags & 0x01:  # the last frame of a message
            messages.append(frames)
            frames = []
    return messages
