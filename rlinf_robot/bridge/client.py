"""``BridgeClient``: the learner end of the bridge (ZeroMQ DEALER).

Two sockets, two threads, one job each:
- the **data socket** belongs to the caller's thread: ``observe``, ``send_chunk`` and ``command``
  use it directly, with no relay thread in between (that hop would cost more than the whole
  loopback round trip);
- the **heartbeat socket** (routing id ``<client_id>#hb``) belongs to a background thread that
  beats every ``heartbeat_ms`` and watches the robot's answers, so the deadman keeps being fed
  while the caller is busy computing the next chunk, and a dead robot is noticed even when the
  caller is idle.
ZeroMQ reconnects both with exponential backoff; when the link comes back the client restores
its subscription and lease. Every wait has a timeout that raises a typed error. Not thread-safe:
use one client from one thread (the heartbeat thread is internal).
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np
import zmq

from rlinf_robot.bridge.config import ClientConfig
from rlinf_robot.bridge.errors import BridgeError, BridgeTimeout, CommandRefused
from rlinf_robot.bridge.latency import LatencyHistogram
from rlinf_robot.bridge.peers import HB_SUFFIX
from rlinf_robot.bridge.transport import more_queued, recv_frames, send_frames
from rlinf_robot.errors import Latched, LinkLost
from rlinf_robot.protocol import (
    ActionChunk,
    Command,
    Error,
    Heartbeat,
    Observation,
    ProtocolError,
    Status,
    decode,
    encode,
)
from rlinf_robot.protocol.codec import peek_type

log = logging.getLogger(__name__)
OBS_HOPS = ("obs_captured", "obs_sent", "obs_received")


def default_client_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class BridgeClient:
    def __init__(self, config: ClientConfig | None = None, **overrides):
        base = config or ClientConfig()
        if overrides:
            base = ClientConfig(**{**base.__dict__, **overrides})
        if not base.client_id:
            base = ClientConfig(**{**base.__dict__, "client_id": default_client_id()})
        self.config = base
        self.client_id = base.client_id
        self.errors: deque[Error] = deque(maxlen=256)  # asynchronous errors (dropped chunks, ...)
        self.last_status: Status | None = None  # the newest unsolicited status (deadman, e-stop)
        self.heartbeat_rtt = LatencyHistogram(1024)
        self.skipped_observations = 0  # received behind a newer one, so never decoded
        self._seq = itertools.count(1)
        self._latest: Observation | None = None
        self._returned_seq = -1
        self._pending: set[int] = set()
        self._replies: dict[int, Status | Error] = {}
        self._subscribed = False
        self._lease = False
        self._ctx: zmq.Context | None = None
        self._sock: zmq.Socket | None = None
        self._poller = zmq.Poller()
        self._hb_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._link_cond = threading.Condition()
        self._link_up = False
        self._epoch = 0  # increments every time the link comes up
        self._seen_epoch = 0

    # ------------------------------------------------------------------ lifecycle
    def connect(self) -> BridgeClient:
        """Open both sockets and wait (``connect_timeout_s``) until the robot answers a heartbeat."""
        if self._ctx is not None:
            return self
        self._ctx = zmq.Context()
        try:
            self._sock = self._socket(self.client_id)
        except (zmq.ZMQError, OSError) as e:
            self.close()
            raise BridgeError(f"cannot connect to {self.config.endpoint}: {e}") from e
        self._poller.register(self._sock, zmq.POLLIN)
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name="bridge-heartbeat", daemon=True)
        self._hb_thread.start()
        deadline = time.monotonic() + self.config.connect_timeout_s
        with self._link_cond:
            answered = self._link_cond.wait_for(lambda: self._epoch > 0, self.config.connect_timeout_s)
            self._seen_epoch = self._epoch
        # The heartbeats have their own connection: wait for this one's handshake too (with
        # ZMQ_IMMEDIATE a send fails until it is done), or a request right away could not go out.
        left_ms = max(0, int((deadline - time.monotonic()) * 1000))
        if not answered or not self._sock.poll(left_ms, zmq.POLLOUT):
            self.close()
            raise BridgeTimeout(
                f"no answer from the robot at {self.config.endpoint} within {self.config.connect_timeout_s} s"
            )
        return self

    def _socket(self, identity: str) -> zmq.Socket:
        cfg = self.config
        assert self._ctx is not None  # both sockets are made between connect() and close()
        sock = self._ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.routing_id = identity.encode()
        sock.setsockopt(zmq.IMMEDIATE, 1)  # never queue for a link that is down: no late replays
        sock.setsockopt(zmq.MAXMSGSIZE, cfg.max_message_bytes)
        sock.setsockopt(zmq.RECONNECT_IVL, cfg.reconnect_ms)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, cfg.reconnect_max_ms)
        sock.sndhwm = 16
        sock.rcvhwm = 64
        if cfg.curve is not None:
            from rlinf_robot.bridge.auth import apply_client_keys

            apply_client_keys(sock, cfg.curve)
        sock.connect(cfg.endpoint)
        return sock

    def close(self, release_lease: bool = True) -> None:
        """Release the control lease if this client holds it (so the next learner need not wait
        for it to lapse; ``release_lease=False`` just goes silent, like a crashed learner), then
        stop the heartbeats and close the sockets."""
        if (
            release_lease
            and getattr(self, "_holds_lease", False)
            and self._sock is not None
            and self._link_up
        ):
            try:
                self.command("release_lease", timeout=1.0)
            except Exception:  # closing must not fail: the lease lapses by itself anyway
                pass
            self._holds_lease = False
        self._stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join(5.0)
            self._hb_thread = None
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None

    def __enter__(self) -> BridgeClient:
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def link_up(self) -> bool:
        return self._link_up

    def wait_link(self, timeout: float) -> None:
        """Block until the link is up (heartbeats answered), else ``LinkLost`` after ``timeout`` s."""
        with self._link_cond:
            if not self._link_cond.wait_for(lambda: self._link_up, timeout):
                raise LinkLost(f"link to {self.config.endpoint} still down after {timeout:g} s")

    @property
    def latest(self) -> Observation | None:
        return self._latest

    # ------------------------------------------------------------------ requests
    def command(self, name: str, timeout: float | None = None, **args) -> Status:
        """Send a ``Command`` and wait for its ``Status``; an ``Error`` reply raises
        ``CommandRefused`` (``Latched`` when the e-stop holds)."""
        timeout = timeout or self.config.request_timeout_s
        self._check_link(timeout)
        seq = next(self._seq)
        self._pump(0)  # empty the receive queue first so the reply cannot be crowded out
        self._pending.add(seq)
        try:
            self._send(Command(seq=seq, name=name, args=args))
            self._wait(lambda: seq in self._replies, timeout, f"no reply to {name!r}")
        finally:
            self._pending.discard(seq)
        reply = self._replies.pop(seq)
        if isinstance(reply, Error):
            if reply.code == "latched":
                raise Latched(reply.message)
            raise CommandRefused(reply.code, reply.message, reply.field)
        if name in ("subscribe", "unsubscribe"):
            self._subscribed = name == "subscribe"
        elif name in ("acquire_lease", "release_lease"):
            self._lease = name == "acquire_lease"
        return reply

    def subscribe(self) -> Status:
        return self.command("subscribe")

    def acquire_lease(self) -> Status:
        status = self.command("acquire_lease")
        self._holds_lease = True
        return status

    def release_lease(self) -> Status:
        self._holds_lease = False
        return self.command("release_lease")

    def status(self) -> Status:
        return self.command("status")

    def observe(
        self,
        timeout: float | None = None,
        after_seq: int | None = None,
        predicate: Callable[[Observation], bool] | None = None,
    ) -> Observation:
        """The newest observation newer than the last one returned (or than ``after_seq``) that
        satisfies ``predicate``; waits up to ``timeout`` s, else ``BridgeTimeout``."""
        timeout = timeout or self.config.request_timeout_s
        if not self._subscribed:
            self.subscribe()
        self._check_link(timeout)
        after = self._returned_seq if after_seq is None else after_seq

        def ready() -> bool:
            o = self._latest
            return o is not None and o.seq > after and (predicate is None or predicate(o))

        self._wait(ready, timeout, "no observation")
        latest = self._latest
        assert latest is not None  # ready() held
        self._returned_seq = latest.seq
        return latest

    def send_chunk(
        self,
        actions: np.ndarray,
        mode: str,
        rate_hz: float,
        obs: Observation | None = None,
        gripper: bool = False,
        align: bool = False,
        first_action_time_ns: int = 0,
        policy_version: int = 0,
    ) -> int:
        """Send ``actions[H, D]`` computed from ``obs`` (default: the newest observation); returns the
        chunk's seq. Does not wait: a drop or refusal arrives later in ``errors`` (``ref_seq``)."""
        self._check_link()
        obs = obs or self._latest
        if obs is None:
            raise BridgeError("no observation yet: a chunk must name the observation it was computed from")
        hops = {k: obs.hops[k] for k in OBS_HOPS if k in obs.hops}
        hops["action_sent"] = time.time_ns()
        seq = next(self._seq)
        arr = np.asarray(actions)
        if arr.dtype.char not in "fd":  # (a char test: comparing with np.float32 builds a dtype)
            arr = arr.astype(np.float32)
        chunk = ActionChunk(
            seq=seq,
            obs_seq=obs.seq,
            policy_version=policy_version,
            control_mode=mode,
            rate_hz=float(rate_hz),
            actions=arr,
            gripper=gripper,
            first_action_time_ns=int(first_action_time_ns),
            hops=hops,
            align=align,
        )
        self._send(chunk)
        return seq

    def take_errors(self, ref_seq: int | None = None) -> list[Error]:
        """Remove and return the asynchronous errors (only those answering ``ref_seq`` if given)."""
        self._pump(0)
        taken = [e for e in self.errors if ref_seq is None or e.ref_seq == ref_seq]
        for e in taken:
            self.errors.remove(e)
        return taken

    # ------------------------------------------------------------------ internals
    def _send(self, msg) -> None:
        if self._sock is None:
            raise BridgeError("client is closed")
        try:
            send_frames(self._sock, encode(msg))  # copied: a 16x8 chunk is 512 bytes
        except zmq.Again:
            raise LinkLost(f"cannot send to {self.config.endpoint}: not connected or queue full") from None

    def _check_link(self, wait_s: float = 0.0) -> None:
        """Raise unless the link is up; requests wait up to ``wait_s`` for a missed heartbeat or two."""
        if self._sock is None:
            raise BridgeError("client is not connected (call connect())")
        if not self._link_up:
            if wait_s <= 0:
                raise LinkLost(f"link to {self.config.endpoint} is down (no heartbeat answer)")
            self.wait_link(wait_s)
        self._restore_if_new_epoch()

    def _restore_if_new_epoch(self) -> None:
        """Restore once per new link epoch; a restore that could not be sent yet (the data socket
        still reconnecting) is tried again on the next call."""
        epoch = self._epoch
        if epoch == self._seen_epoch or not self._link_up:
            return
        try:
            self._restore()
        except LinkLost:
            return
        self._seen_epoch = epoch

    def _restore(self) -> None:
        """The link came back: the robot may have restarted, so restate who we are."""
        log.info("link to %s is back; restoring subscription/lease", self.config.endpoint)
        self._latest, self._returned_seq = None, -1
        for wanted, name in ((self._subscribed, "subscribe"), (self._lease, "acquire_lease")):
            if wanted:
                self._send(Command(seq=next(self._seq), name=name))

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        self._pump(0)
        while not ready():
            self._restore_if_new_epoch()  # the link came back (or the robot restarted) meanwhile
            left = deadline - time.monotonic()
            if left <= 0:
                state = "" if self._link_up else " (link down)"
                raise BridgeTimeout(f"{what} from {self.config.endpoint} within {timeout:.3g} s{state}")
            self._pump(min(left, 0.05) * 1000.0)

    def _pump(self, timeout_ms: float) -> None:
        """Wait up to ``timeout_ms`` for traffic, then handle everything queued."""
        if self._sock is None:
            raise BridgeError("client is closed")
        sock = self._sock
        if not self._poller.poll(int(timeout_ms)):  # >= 0 here; pyzmq truncates a float to int itself
            return
        batch: list[tuple[list, int]] = []  # (frames, receive time)
        while True:
            frames = recv_frames(sock)
            if frames is None:
                break
            batch.append((frames, time.time_ns()))
            if not more_queued(sock):
                break
        # Only the newest observation of a batch is decoded: the others are already replaced.
        # (Peeking at the type costs a header parse, so a batch of one - the usual case - skips it.)
        kinds: list[str | None] = [None]
        newest_obs = -1
        if len(batch) > 1:
            kinds = [peek_type(frames[0]) for frames, _ in batch]
            newest_obs = max((i for i, kind in enumerate(kinds) if kind == "observation"), default=-1)
        for i, (frames, t_rx) in enumerate(batch):
            if i < newest_obs and kinds[i] == "observation":
                self.skipped_observations += 1
                continue
            try:
                msg = decode(frames, self.config.max_message_bytes)
            except ProtocolError as e:
                log.warning("undecodable message from the robot: %s", e)
            else:
                self._route(msg, t_rx)

    def _route(self, msg, t_rx: int) -> None:
        if isinstance(msg, Observation):
            msg.hops["obs_received"] = t_rx
            if self._latest is not None and msg.seq <= self._latest.seq:
                self._returned_seq = -1  # sequence restarted: the robot side restarted
            self._latest = msg
        elif isinstance(msg, Status | Error) and msg.ref_seq in self._pending:
            self._replies[msg.ref_seq] = msg
        elif isinstance(msg, Status):
            if msg.ref_seq < 0:
                self.last_status = msg
        elif isinstance(msg, Error):
            self.errors.append(msg)

    # ------------------------------------------------------------------ heartbeat thread
    def _heartbeat_loop(self) -> None:
        sock = self._socket(self.client_id + HB_SUFFIX)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        period = self.config.heartbeat_ms / 1e3
        link_timeout = self.config.link_timeout_ms / 1e3
        last_answer = -float("inf")
        sent_at = 0.0
        seq = 0
        robot_seq = -1  # the robot's message counter, from its heartbeat answers
        next_beat = time.monotonic()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= next_beat:
                    seq += 1
                    try:
                        sock.send(
                            encode(Heartbeat(seq=seq, stamp_ns=time.monotonic_ns(), sender=self.client_id))[
                                0
                            ],
                            zmq.NOBLOCK,
                        )
                        sent_at = now
                    except zmq.Again:
                        pass  # not connected: nothing queues (IMMEDIATE)
                    next_beat = max(next_beat + period, now)
                if poller.poll(int(max(0.0, next_beat - time.monotonic()) * 1000.0)):
                    while True:
                        try:
                            frames = sock.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        try:
                            msg = decode(frames)
                        except ProtocolError:
                            continue
                        if isinstance(msg, Heartbeat):
                            last_answer = time.monotonic()
                            self.heartbeat_rtt.record((last_answer - sent_at) * 1e3)
                            if msg.seq <= robot_seq:
                                self._robot_restarted()
                            robot_seq = msg.seq
                        elif isinstance(msg, Error):
                            log.warning("robot refused a heartbeat: %s", msg.message)
                self._set_link(time.monotonic() - last_answer < link_timeout)
        finally:
            sock.close(0)
            self._set_link(False)

    def _robot_restarted(self) -> None:
        """The robot's messages count from 1 again: its bridge restarted faster than
        ``link_timeout_ms``, so the link never looked down, but the new bridge knows nothing of this
        client. A new link epoch makes the next call restate the subscription and the lease."""
        with self._link_cond:
            self._epoch += 1
            self._link_cond.notify_all()
        log.warning("the robot at %s restarted; restoring subscription/lease", self.config.endpoint)

    def _set_link(self, up: bool) -> None:
        if up == self._link_up:
            return
        with self._link_cond:
            self._link_up = up
            if up:
                self._epoch += 1
            self._link_cond.notify_all()
        if (self._epoch > 1 or not up) and not self._stop.is_set():
            log.log(
                logging.INFO if up else logging.WARNING,
                "link to %s %s",
                self.config.endpoint,
                "restored" if up else "lost",
            )
