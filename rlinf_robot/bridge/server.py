"""``BridgeServer``: the robot end of the bridge (ZeroMQ ROUTER, one I/O thread).

One thread owns the socket and every decision: it receives chunks, commands and heartbeats,
publishes observations at the robot's rate, runs the chunk scheduler and the deadman. A single
thread means no locks around the lease or the plan and a deadman that wakes exactly at its
deadline (the poll timeout is the next deadline). Backend commands that block (``home``) run on a
worker thread; while one runs, motion is refused but ``stop``, heartbeats and the deadman go on.

Nothing a client sends can stop the loop: every message is decoded inside a guard and a bad one is
answered with an ``Error``. Only the lease holder moves the arm, and only through the safety filter.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

from rlinf_robot.bridge.backend import ArmBackend
from rlinf_robot.bridge.config import ServerConfig
from rlinf_robot.bridge.errors import BridgeError
from rlinf_robot.bridge.events import EventLog
from rlinf_robot.bridge.handlers import COMMANDS, BusySlot, CommandContext, finish_backend_command
from rlinf_robot.bridge.latency import HopLatencies
from rlinf_robot.bridge.lease import Lease, LinkWatch
from rlinf_robot.bridge.motion import Motion
from rlinf_robot.bridge.peers import Peer, client_id_of, is_heartbeat_socket
from rlinf_robot.bridge.scheduler import Dropped
from rlinf_robot.bridge.transport import more_queued, recv_frames, send_frames
from rlinf_robot.protocol import ActionChunk, Command, Error, Heartbeat, ProtocolError, Status, decode, encode
from rlinf_robot.robot.sched import set_thread_nice
from rlinf_robot.safety import EStop, SafetyLimits

if TYPE_CHECKING:
    from rlinf_robot.bridge.auth import ServerSecurity

log = logging.getLogger(__name__)
MAX_PEERS = 1024
MAX_BATCH = 256  # messages handled per wake-up before timers run again
#: Connection events counted under CURVE (status counters of the same names): a flood of
#: connections that never authenticate shows as ``connections_accepted`` far above
#: ``handshakes_succeeded`` (garbage that is not ZMTP is dropped without a failure event).
CONNECTION_EVENTS = {
    zmq.EVENT_ACCEPTED: "connections_accepted",
    zmq.EVENT_HANDSHAKE_SUCCEEDED: "handshakes_succeeded",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "handshakes_failed",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "handshakes_failed",
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "handshakes_failed",
}
HANDSHAKE_IVL_MS = 5000  # a connection still not through its handshake after this is closed


class BridgeServer:
    def __init__(
        self, backend: ArmBackend, config: ServerConfig | None = None, limits: SafetyLimits | None = None
    ):
        self.backend = backend
        self.config = config or ServerConfig()
        self.limits = limits or SafetyLimits.from_yaml()
        self.events = EventLog()
        self.latency = HopLatencies()
        self.counters: Counter[str] = Counter()
        self.estop = EStop()
        self.lease = Lease(int(self.config.lease_timeout_ms * 1e6))
        self.link = LinkWatch(self.config.deadman_ms, self.events)
        self.motion = Motion(
            backend,
            self.limits,
            int(self.config.max_obs_age_ms * 1e6),
            self.events,
            self.latency,
            self._count,
        )
        self.endpoint = ""
        self._lock = threading.Lock()
        self._peers: dict[bytes, Peer] = {}
        self._obs_stamps: OrderedDict[int, int] = OrderedDict()
        self._obs_seq = 0
        self._out_seq = itertools.count(1)  # seq of messages the server originates
        self.busy = BusySlot()
        self._obs_period_ns = int(1e9 / self.config.obs_rate_hz)
        self._next_obs_ns = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ctx: zmq.Context | None = None
        self._sock: zmq.Socket | None = None
        self._security: ServerSecurity | None = None
        self._monitor: zmq.Socket | None = None
        self._commands = CommandContext(
            backend=backend,
            lease=self.lease,
            estop=self.estop,
            motion=self.motion,
            link=self.link,
            busy=self.busy,
            events=self.events,
            count=self._count,
            send=self._send,
            broadcast=self._broadcast_status,
            status=self.status,
            arm_refusal=self._arm_refusal,
        )

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> BridgeServer:
        cfg = self.config
        self._ctx = zmq.Context()
        sock = self._ctx.socket(zmq.ROUTER)
        sock.linger = 0
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
        sock.setsockopt(zmq.MAXMSGSIZE, cfg.max_message_bytes)
        sock.sndhwm = cfg.send_hwm
        sock.rcvhwm = cfg.send_hwm * 4
        try:
            if cfg.curve is not None:
                from rlinf_robot.bridge.auth import ServerSecurity

                self._security = ServerSecurity(self._ctx, cfg.curve, self._on_refused_key)
                self._security.apply(sock)
                # connections that fail before ZAP is asked (a replayed or forged CURVE handshake,
                # garbage instead of ZMTP) are seen only by a monitor: count them
                events = 0
                for event in CONNECTION_EVENTS:
                    events |= event
                self._monitor = sock.get_monitor_socket(events)
                sock.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_IVL_MS)
            sock.bind(cfg.endpoint)
        except (zmq.ZMQError, BridgeError) as e:
            sock.close(0)
            self._shutdown_context()
            raise BridgeError(f"cannot bind the bridge on {cfg.endpoint}: {e}") from e
        self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._sock = sock
        self._thread = threading.Thread(target=self._run, name="bridge-server", daemon=True)
        self._thread.start()
        self.events.add("started", endpoint=self.endpoint, curve=cfg.curve is not None)
        log.info("bridge listening on %s (CURVE %s)", self.endpoint, "on" if cfg.curve else "off")
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.busy.shutdown()
        self._shutdown_context()

    def _shutdown_context(self) -> None:
        if self._security is not None:
            self._security.stop()
            self._security = None
        if self._monitor is not None:
            if self._sock is not None:
                self._sock.disable_monitor()
            self._monitor.close(0)
            self._monitor = None
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None

    def __enter__(self) -> BridgeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ status
    def state_name(self) -> str:
        if self.estop.latched:
            return "ESTOP"
        fault = self.backend.fault_state()
        if fault:
            return fault
        if self.link.lost:
            return "LINK_LOST"
        if self.motion.active:
            return "ACTIVE"
        return "HOLD" if self.lease.holder else "IDLE"

    def status(self, ref_seq: int = -1, message: str = "") -> Status:
        """A snapshot of state, lease, counters and latency percentiles (safe from any thread)."""
        with self._lock:
            counters = dict(self.counters)
        for f in self.motion.filters():
            for k, v in f.snapshot().items():
                counters[f"safety_{k}"] = counters.get(f"safety_{k}", 0) + v
        counters["deadman_trips"] = self.link.trips
        counters["estop_triggers"] = self.estop.count
        counters["skipped_steps"] = self.motion.scheduler.skipped_steps
        if self._security is not None:
            counters["unauthorized"] = self._security.allow.refused
        return Status(
            seq=next(self._out_seq),
            stamp_ns=time.monotonic_ns(),
            state=self.state_name(),
            lease_holder=self.lease.holder,
            counters=counters,
            latency_ms=self.latency.summary(),
            message=message,
            ref_seq=ref_seq,
        )

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] += n

    # ------------------------------------------------------------------ the loop
    def _raise_priority(self) -> None:
        nice = self.config.io_thread_nice
        if nice and not set_thread_nice(nice):
            log.debug("bridge I/O thread keeps its priority (nice %d not permitted)", nice)

    def _run(self) -> None:
        self._raise_priority()
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        if self._monitor is not None:
            poller.register(self._monitor, zmq.POLLIN)
        self._next_obs_ns = time.monotonic_ns()
        next_house_ns = 0
        while not self._stop.is_set():
            now = time.monotonic_ns()
            # Observations only while someone subscribed: a chunk must name a published one anyway,
            # and an idle robot PC should not sample and encode for nobody.
            publishing = any(p.subscribed for p in self._peers.values())
            wake = min(self._next_obs_ns if publishing else now + 50_000_000, next_house_ns)
            for t in (self.motion.scheduler.next_deadline_ns(), self._deadman_deadline_ns()):
                if t is not None:
                    wake = min(wake, t)
            if self.busy.running is not None:
                wake = min(wake, now + 2_000_000)
            timeout_ms = max(0, math.ceil((wake - now) / 1e6))
            try:
                if poller.poll(timeout_ms):
                    self._drain()
                    self._drain_monitor()
                now = time.monotonic_ns()
                finish_backend_command(self._commands)
                self._flush_backlogs()
                self._check_deadman(now)
                self._run_steps(time.monotonic_ns())
                if publishing and now >= self._next_obs_ns:
                    self._publish_observation()
                    self._next_obs_ns = max(
                        self._next_obs_ns + self._obs_period_ns, now + self._obs_period_ns // 2
                    )
                if now >= next_house_ns:
                    self._housekeeping(now)
                    next_house_ns = now + 100_000_000
            except Exception:  # the loop must survive anything a backend or a peer does
                log.exception("bridge loop error; holding")
                self._count("loop_errors")
                self._hold("loop_error")
        if self.motion.scheduler.cancel() is not None:
            self.motion.safe_backend(self.backend.hold)

    def _drain(self) -> None:
        sock = self._sock
        assert sock is not None  # the I/O loop runs between start() and stop()
        for _ in range(MAX_BATCH):
            frames = recv_frames(sock)
            if frames is None:
                return
            self._handle(frames, time.time_ns())
            if not more_queued(sock):
                return

    def _drain_monitor(self) -> None:
        while self._monitor is not None:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            name = CONNECTION_EVENTS.get(zmq.Event(event["event"]))
            if name is not None:
                self._count(name)
                if name == "handshakes_failed":
                    self.events.add("handshake_failed", event=int(event["event"]), value=int(event["value"]))

    # ------------------------------------------------------------------ dispatch
    def _handle(self, frames: list, t_rx_wall: int) -> None:
        identity = frames[0].bytes
        now = time.monotonic_ns()
        peer = self._peer(identity, frames, now)
        if self._revoked(peer):
            return self._revoke(peer, now)
        if len(frames) < 2:
            return self._reply_error(identity, ProtocolError("empty message"))
        try:
            msg = decode(frames[1:], self.config.max_message_bytes)
        except ProtocolError as e:
            self._count("malformed" if e.code != "version" else "bad_version")
            return self._reply_error(identity, e)
        handler = self._HANDLERS.get(type(msg))
        if handler is None:
            self._count("unexpected_message")
            if not isinstance(msg, Error):  # never answer an error with an error
                self._send(
                    identity,
                    Error(
                        code="refused",
                        message=f"a client may not send {msg.__struct_config__.tag}",
                        field="$.type",
                        ref_seq=msg.seq,
                    ),
                )
            return None
        return handler(self, peer, msg, now, t_rx_wall)

    def _peer(self, identity: bytes, frames: list, now: int) -> Peer:
        peer = self._peers.get(identity)
        if peer is None:
            if len(self._peers) >= MAX_PEERS:
                self._housekeeping(now, force=True)
            key = ""
            try:
                key = frames[-1].get("User-Id") or ""
            except (zmq.ZMQError, AttributeError):
                pass
            peer = Peer(identity, client_id_of(identity), key, now)
            self._peers[identity] = peer
        peer.last_seen_ns = now
        return peer

    def _on_heartbeat(self, peer: Peer, msg: Heartbeat, now: int, t_rx: int) -> None:
        if msg.sender and msg.sender != peer.client_id:
            self._count("refused_heartbeat")
            self._send(
                peer.identity,
                Error(
                    code="refused",
                    message="heartbeat sender does not match the connection",
                    field="$.sender",
                    ref_seq=msg.seq,
                ),
            )
            return
        if self.lease.beat(peer.client_id, peer.key, now):
            self.link.feed(now)
        data_peer = self._peers.get(peer.client_id.encode())
        if data_peer is not None:  # the client's data socket is alive as long as it beats
            data_peer.last_seen_ns = now
        self._send(peer.identity, Heartbeat(seq=next(self._out_seq), stamp_ns=now, sender=self.config.name))

    def _on_chunk(self, peer: Peer, chunk: ActionChunk, now: int, t_rx: int) -> None:
        self._count("chunks_received")
        refusal = self._motion_refusal(peer)
        if refusal is not None:
            self._count(f"chunks_refused_{refusal[0]}")
            self._send(peer.identity, Error(code=refusal[0], message=refusal[1], ref_seq=chunk.seq))
            return
        if not np.all(np.isfinite(chunk.actions)):
            self._count("chunks_rejected_non_finite")
            self._send(
                peer.identity,
                Error(code="unsafe", message="NaN or inf in actions", field="$.actions", ref_seq=chunk.seq),
            )
            return
        self.lease.beat(peer.client_id, peer.key, now)
        self.link.feed(now)
        result = self.motion.accept(chunk, now, self._obs_stamps.get(chunk.obs_seq))
        if isinstance(result, Dropped):
            self._count(f"chunks_dropped_{result.reason}")
            self.events.add("chunk_dropped", seq=chunk.seq, reason=result.reason)
            self._send(peer.identity, Error(code=result.reason, message=result.detail, ref_seq=chunk.seq))
            return
        result.plan.hops["action_received"] = t_rx
        self._count("chunks_accepted")
        self._count("steps_skipped_on_arrival", result.skipped)
        self.events.add("chunk_accepted", seq=chunk.seq, skipped=result.skipped, pending=result.pending)
        self._run_steps(time.monotonic_ns())

    def _on_command(self, peer: Peer, cmd: Command, now: int, t_rx: int) -> None:
        self._count(f"command_{cmd.name}")
        outcome = COMMANDS[cmd.name](self._commands, peer, cmd, now)
        if outcome is None:  # deferred: answered when the worker finishes
            return
        if isinstance(outcome, Error):
            outcome.ref_seq = cmd.seq
            self._send(peer.identity, outcome)
        else:
            self._send(peer.identity, self.status(ref_seq=cmd.seq, message=outcome))

    _HANDLERS: ClassVar[dict[type, Callable[[BridgeServer, Peer, Any, int, int], None]]] = {
        Heartbeat: _on_heartbeat,
        ActionChunk: _on_chunk,
        Command: _on_command,
    }

    # ------------------------------------------------------------------ who may move the arm
    def _motion_refusal(self, peer: Peer) -> tuple[str, str] | None:
        """Only the lease holder, never while latched, busy or faulted."""
        if not self.lease.held_by(peer.client_id, peer.key):
            holder = self.lease.holder or "nobody"
            return "refused", f"{peer.client_id} does not hold the control lease (held by {holder})"
        return self._arm_refusal()

    def _arm_refusal(self) -> tuple[str, str] | None:
        """(code, why) while nobody may move the arm: an e-stop here or on the arm is ``latched``,
        a running home/reset/recover ``busy``, a REFLEX / RECOVERING / LATCHED arm ``fault``."""
        if self.estop.latched:
            return "latched", f"e-stop latched ({self.estop.reason}); send reset"
        if self.busy.running is not None:
            return "busy", f"{self.busy.name} in progress"
        fault = self.backend.fault_state()
        if fault == "ESTOP":
            return "latched", "the arm's e-stop is latched; send reset"
        if fault:
            return "fault", f"arm is in {fault}"
        return None

    def _deadman_deadline_ns(self) -> int | None:
        return self.link.deadline_ns() if self.lease.holder else None

    def _check_deadman(self, now: int) -> None:
        if not self.lease.holder or not self.link.trip(now):
            return
        self._hold("deadman")
        self.events.add("deadman", last_feed_ns=self.link.last_feed_ns, holder=self.lease.holder)
        log.warning(
            "deadman: no heartbeat or chunk from %s for %.0f ms; holding",
            self.lease.holder,
            (time.monotonic_ns() - self.link.last_feed_ns) / 1e6,
        )
        self._broadcast_status("deadman: link to the lease holder lost")

    def _hold(self, reason: str) -> None:
        self.motion.hold(reason)

    def _run_steps(self, now: int) -> None:
        if self.backend.fault_state():  # a reflex moved the arm: the commanded target is void
            self.motion.forget_target()
        if self.motion.run_due(now, self._reply_holder):
            self._next_obs_ns = now  # an observation right at the end of a chunk (with its trace)

    # ------------------------------------------------------------------ output
    def _publish_observation(self) -> None:
        subscribers = [p for p in self._peers.values() if p.subscribed]
        if not subscribers:
            return
        try:
            obs = self.backend.observe()
        except Exception as e:
            self._count("backend_errors")
            log.error("backend observe failed: %s", e)
            return
        if obs is None:
            self._count("obs_unavailable")
            return
        self._obs_seq += 1
        obs.seq = self._obs_seq
        for key, value in self.motion.chunk_fields().items():
            setattr(obs, key, value)
        self._obs_stamps[obs.seq] = obs.stamp_ns
        while len(self._obs_stamps) > self.config.obs_history:
            self._obs_stamps.popitem(last=False)
        obs.hops = {**obs.hops, "obs_sent": time.time_ns()}
        frames = encode(obs)
        for peer in subscribers:
            if peer.backlog or not self._send_frames(peer.identity, frames):
                self._count("obs_dropped")  # replies it is owed go first; an observation is soon stale
        self.latency.record(obs.hops)  # bookkeeping after the send: it is not on the path
        self._count("obs_published")

    def _broadcast_status(self, message: str) -> None:
        status = self.status(message=message)
        for peer in list(self._peers.values()):
            if peer.subscribed or (
                peer.client_id == self.lease.holder and not is_heartbeat_socket(peer.identity)
            ):
                self._send(peer.identity, status)

    def _reply_holder(self, msg: Error) -> None:
        for peer in self._peers.values():
            if self.lease.held_by(peer.client_id, peer.key) and not is_heartbeat_socket(peer.identity):
                self._send(peer.identity, msg)

    def _reply_error(self, identity: bytes, e: ProtocolError) -> None:
        self._send(identity, Error(code=e.code, message=str(e), field=e.field or "", ref_seq=e.ref_seq))

    def _send(self, identity: bytes, msg) -> bool:
        """Send a status or error. When the peer's queue is full (a subscriber that stopped reading
        has it filled with observations) the reply is kept and sent once there is room, ahead of
        any further observation: ZeroMQ would drop it, and the client would wait for it in vain."""
        frames = encode(msg)
        peer = self._peers.get(identity)
        if peer is not None and peer.backlog:
            self._keep(peer)
            peer.backlog.append(frames)
            return True
        if self._send_frames(identity, frames):
            return True
        if peer is None:
            return False
        self._keep(peer)
        peer.backlog.append(frames)
        return True

    def _keep(self, peer: Peer) -> None:
        if len(peer.backlog) == peer.backlog.maxlen:
            self._count("replies_lost")
        self._count("replies_delayed")

    def _flush_backlogs(self) -> None:
        for peer in list(self._peers.values()):
            while peer.backlog:
                if not self._send_frames(peer.identity, peer.backlog[0]):
                    break
                peer.backlog.popleft()

    def _send_frames(self, identity: bytes, frames: list) -> bool:
        sock = self._sock
        assert sock is not None  # only the I/O loop sends, and it runs between start() and stop()
        try:
            send_frames(sock, [identity, *frames])
            return True
        except zmq.Again:
            self._count("send_would_block")
        except zmq.ZMQError as e:
            if e.errno == zmq.EHOSTUNREACH and self._peers.pop(identity, None) is not None:
                self._count("peers_unreachable")  # its connection is gone: nobody to tell
            self._count("send_failed")
        return False

    def _housekeeping(self, now: int, force: bool = False) -> None:
        limit = int(self.config.peer_timeout_s * 1e9)
        if self._security is not None:
            self._security.allow.refresh()
        for peer in list(self._peers.values()):
            if self._revoked(peer):
                self._revoke(peer, now)
                continue
            silent = now - peer.last_seen_ns > limit
            if silent or (force and not peer.subscribed):
                self._drop_peer(peer, now, "silent" if silent else "too_many_peers")
        if self.lease.expired(now):
            holder = self.lease.release()
            self._hold("lease_expired")
            self._count("lease_expired")
            self.events.add("lease_expired", client=holder)
            self._broadcast_status(f"lease of {holder} expired")

    def _revoked(self, peer: Peer) -> bool:
        """A CURVE peer whose key left the authorized directory after it connected."""
        return self._security is not None and bool(peer.key) and not self._security.allow.allows(peer.key)

    def _revoke(self, peer: Peer, now: int) -> None:
        """Forget a revoked peer without a word (it gets nothing more, as an unknown key gets
        nothing); if it held the lease, the arm holds and the lease is free for another learner."""
        self._peers.pop(peer.identity, None)
        self._count("revoked")
        if self.lease.held_by(peer.client_id, peer.key):
            self.lease.release()
            self._hold("revoked")
            self.events.add("revoked", client=peer.client_id, key=peer.key, held_lease=True)
            log.warning("key of %s was revoked while it held the lease; holding", peer.client_id)
            self._broadcast_status(
                f"lease of {peer.client_id} revoked (its key left the authorized directory)"
            )
        else:
            self.events.add("revoked", client=peer.client_id, key=peer.key, held_lease=False)

    def _drop_peer(self, peer: Peer, now: int, why: str) -> None:
        """Forget a peer, and tell it so: a client that is still there sees an ``Error`` of code
        ``dropped`` (and must ``subscribe`` again to get observations)."""
        del self._peers[peer.identity]
        self._count("peers_dropped")
        if peer.subscribed:
            self._count("subscribers_dropped")
        self.events.add("peer_dropped", client=peer.client_id, subscribed=peer.subscribed, why=why)
        if is_heartbeat_socket(peer.identity):
            return
        if why == "silent":
            quiet_s = (now - peer.last_seen_ns) / 1e9
            message = (
                f"no message from {peer.client_id} for {quiet_s:.1f} s (peer_timeout_s "
                f"{self.config.peer_timeout_s:g}): forgotten"
            )
        else:
            message = f"more than {MAX_PEERS} peers: idle ones are forgotten"
        if peer.subscribed:
            message += "; observations stopped: send subscribe again"
        self._send(peer.identity, Error(code="dropped", message=message))

    def _on_refused_key(self, key: str) -> None:
        self.events.add("unauthorized", key=key)
