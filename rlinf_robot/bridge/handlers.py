"""The server's answers to ``Command`` messages: a registry from command name to handler.

Each handler runs on the server's I/O thread and returns a message for the ``Status`` reply, an
``Error``, or None when the answer comes later (backend commands run on the worker thread and
``check_busy`` replies when they finish).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rlinf_robot.bridge.backend import BACKEND_COMMANDS
from rlinf_robot.protocol import Command, Error

if TYPE_CHECKING:
    from rlinf_robot.bridge.peers import Peer
    from rlinf_robot.bridge.server import BridgeServer


def cmd_status(server: BridgeServer, peer: Peer, cmd: Command, now: int) -> str:
    return "ok"


def cmd_subscribe(server: BridgeServer, peer: Peer, cmd: Command, now: int) -> str:
    peer.subscribed = cmd.name == "subscribe"
    server.events.add(cmd.name, client=peer.client_id)
    return cmd.name + "d"


def cmd_acquire_lease(server: BridgeServer, peer: Peer, cmd: Command, now: int) -> str | Error:
    generation = server.lease.generation
    why = server.lease.acquire(peer.client_id, peer.key, now)
    if why is not None:
        server._count("lease_refused")
        return Error(code="refused", message=why)
    if server.lease.generation != generation:  # a new controller: its chunk seqs start afresh
        server.motion.scheduler.cancel()
        server.motion.scheduler.last_seq = -1
        server.motion.forget_target()
    server._feed(now)
    server.events.add("lease_acquired", client=peer.client_id, generation=server.lease.generation)
    return f"lease granted to {peer.client_id}"


def cmd_release_lease(server: BridgeServer, peer: Peer, cmd: Command, now: int) -> str | Error:
    if not server.lease.held_by(peer.client_id, peer.key):
        return Error(code="refused", message=f"{peer.client_id} does not hold the lease")
    server._hold("lease_released")
    server.lease.release()
    server.events.add("lease_released", client=peer.client_id)
    return "lease released"


def cmd_stop(server: BridgeServer, peer: Peer, cmd: Command, now: int) -> str:
    """Anyone connected may stop the arm; only a reset clears it."""
    server.estop.trigger(f"stop from {peer.client_id}")
    server.motion.scheduler.cancel()
    server.motion.forget_target()
    server.motion.safe_backend(server.backend.stop)
    server.events.add("estop", client=peer.client_id)
    server._broadcast_status("e-stop")
    return "e-stop latched"


def cmd_backend(server: BridgeServer, peer: Peer, cmd: Command, now: int) -> str | Error | None:
    """home / recover / reset: run on the worker; the reply is sent when it finishes."""
    if server.lease.holder and not server.lease.held_by(peer.client_id, peer.key):
        return Error(code="refused", message=f"the control lease is held by {server.lease.holder!r}")
    if not server.lease.holder and cmd.name != "reset":
        return Error(code="refused", message=f"{cmd.name} needs the control lease")
    if server._busy is not None:
        return Error(code="busy", message=f"{server._busy[2].name} in progress")
    if cmd.name == "home" and server.estop.latched:
        return Error(code="latched", message="e-stop latched; send reset first")
    # The command supersedes a running chunk: cancel it here. No hold is sent downstream: the
    # backend runs home / reset / recover itself, and a hold racing the command there would end
    # it (franka_node's hold also ends a homing goal).
    if server.motion.scheduler.cancel() is not None:
        server.events.add("hold", reason=cmd.name, had_plan=True)
    server.motion.forget_target()  # the command moves the arm: the next delta starts from it
    future = server._executor.submit(server.backend.run_command, cmd.name, dict(cmd.args))
    server._busy = (future, peer.identity, cmd)
    server.events.add("command_started", name=cmd.name, client=peer.client_id)
    return None


def check_busy(server: BridgeServer) -> None:
    if server._busy is None or not server._busy[0].done():
        return
    future, identity, cmd = server._busy
    server._busy = None
    try:
        message = future.result()
    except Exception as e:  # a failed home/recover is reported, not raised
        server._count(f"command_{cmd.name}_failed")
        server.events.add("command_failed", name=cmd.name, error=str(e))
        server._send(identity, Error(code="failed", message=f"{cmd.name} failed: {e}", ref_seq=cmd.seq))
        return
    if cmd.name == "reset":
        server.estop.reset()
        server._link_lost = False
    server.events.add("command_done", name=cmd.name)
    server._send(identity, server.status(ref_seq=cmd.seq, message=str(message)))


COMMANDS: dict[str, Callable] = {
    "status": cmd_status,
    "subscribe": cmd_subscribe,
    "unsubscribe": cmd_subscribe,
    "acquire_lease": cmd_acquire_lease,
    "release_lease": cmd_release_lease,
    "stop": cmd_stop,
    **{name: cmd_backend for name in BACKEND_COMMANDS},
}
