"""The server's answers to ``Command`` messages: a registry from command name to handler.

A handler gets a ``CommandContext``: what a command may touch (the lease, the e-stop, the motion,
the link watch, the busy slot) and how it may talk (``send`` to one peer, ``broadcast`` a status).
Nothing else of the server is its API. Each handler runs on the server's I/O thread and returns
a message for the ``Status`` reply, an ``Error``, or None when the answer comes later: backend
commands run in the ``BusySlot``'s worker thread and ``finish_backend_command`` replies once the
arm is done (``ArmBackend.run_command`` returns only when the arm's state reflects the command).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlinf_robot.bridge.backend import BACKEND_COMMANDS, ArmBackend
from rlinf_robot.protocol import Command, Error, Status

if TYPE_CHECKING:
    from rlinf_robot.bridge.events import EventLog
    from rlinf_robot.bridge.lease import Lease, LinkWatch
    from rlinf_robot.bridge.motion import Motion
    from rlinf_robot.bridge.peers import Peer
    from rlinf_robot.safety import EStop


@dataclass(frozen=True)
class Running:
    """The backend command in progress: who asked, and its outcome once done."""

    cmd: Command
    identity: bytes
    future: Future
    estop_generation: int  # the e-stop's generation when it started: a reset clears no newer stop


class BusySlot:
    """At most one blocking backend command (``home`` / ``reset`` / ``recover``) at a time, run on
    one worker thread so the I/O thread keeps serving heartbeats, ``stop`` and the deadman."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="bridge-cmd")
        self.running: Running | None = None

    @property
    def name(self) -> str:
        return self.running.cmd.name if self.running is not None else ""

    def start(self, fn: Callable[[], str], cmd: Command, identity: bytes, estop_generation: int) -> None:
        self.running = Running(cmd, identity, self._executor.submit(fn), estop_generation)

    def take_done(self) -> Running | None:
        """The finished command, once (None while it runs or when nothing runs)."""
        run = self.running
        if run is None or not run.future.done():
            return None
        self.running = None
        return run

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class CommandContext:
    """What a command handler may do. Built once by the server; every field is an object that
    owns its state or a callable the server provides."""

    backend: ArmBackend
    lease: Lease
    estop: EStop
    motion: Motion
    link: LinkWatch
    busy: BusySlot
    events: EventLog
    count: Callable[..., None]  # count(name, n=1): a decision counter in ``status.counters``
    send: Callable[[bytes, object], bool]  # send(identity, message) to one peer
    broadcast: Callable[[str], None]  # an unsolicited status to the subscribers and the holder
    status: Callable[..., Status]  # status(ref_seq=..., message=...): the server's snapshot
    arm_refusal: Callable[[], tuple[str, str] | None]  # (code, why) while the arm refuses motion

    def hold(self, reason: str) -> None:
        self.motion.hold(reason)


def cmd_status(ctx: CommandContext, peer: Peer, cmd: Command, now: int) -> str:
    return "ok"


def cmd_subscribe(ctx: CommandContext, peer: Peer, cmd: Command, now: int) -> str:
    peer.subscribed = cmd.name == "subscribe"
    ctx.events.add(cmd.name, client=peer.client_id)
    return cmd.name + "d"


def cmd_acquire_lease(ctx: CommandContext, peer: Peer, cmd: Command, now: int) -> str | Error:
    generation = ctx.lease.generation
    why = ctx.lease.acquire(peer.client_id, peer.key, now)
    if why is not None:
        ctx.count("lease_refused")
        return Error(code="refused", message=why)
    if ctx.lease.generation != generation:  # a new controller: its chunk seqs start afresh
        ctx.motion.scheduler.cancel()
        ctx.motion.scheduler.last_seq = -1
        ctx.motion.forget_target()
    ctx.link.feed(now)
    ctx.events.add("lease_acquired", client=peer.client_id, generation=ctx.lease.generation)
    return f"lease granted to {peer.client_id}"


def cmd_release_lease(ctx: CommandContext, peer: Peer, cmd: Command, now: int) -> str | Error:
    if not ctx.lease.held_by(peer.client_id, peer.key):
        return Error(code="refused", message=f"{peer.client_id} does not hold the lease")
    ctx.hold("lease_released")
    ctx.lease.release()
    ctx.events.add("lease_released", client=peer.client_id)
    return "lease released"


def cmd_stop(ctx: CommandContext, peer: Peer, cmd: Command, now: int) -> str:
    """Anyone connected may stop the arm; only a reset clears it."""
    ctx.estop.trigger(f"stop from {peer.client_id}")
    ctx.motion.scheduler.cancel()
    ctx.motion.forget_target()
    ctx.motion.safe_backend(ctx.backend.stop)
    ctx.events.add("estop", client=peer.client_id)
    ctx.broadcast("e-stop")
    return "e-stop latched"


def cmd_backend(ctx: CommandContext, peer: Peer, cmd: Command, now: int) -> str | Error | None:
    """home / recover / reset: run on the worker; the reply is sent when it finishes."""
    if ctx.lease.holder and not ctx.lease.held_by(peer.client_id, peer.key):
        return Error(code="refused", message=f"the control lease is held by {ctx.lease.holder!r}")
    if not ctx.lease.holder and cmd.name != "reset":
        return Error(code="refused", message=f"{cmd.name} needs the control lease")
    if ctx.busy.running is not None:
        return Error(code="busy", message=f"{ctx.busy.name} in progress")
    if cmd.name != "reset":
        refusal = ctx.arm_refusal()
        if refusal is not None and refusal[0] == "latched":  # an e-stop here or on the arm
            return Error(code="latched", message=f"{refusal[1]}; send reset first")
    # The command supersedes a running chunk: cancel it here. No hold is sent downstream: the
    # backend runs home / reset / recover itself, and a hold racing the command there would end
    # it (franka_node's hold also ends a homing goal).
    if ctx.motion.scheduler.cancel() is not None:
        ctx.events.add("hold", reason=cmd.name, had_plan=True)
    ctx.motion.forget_target()  # the command moves the arm: the next delta starts from it
    args = dict(cmd.args)
    ctx.busy.start(lambda: ctx.backend.run_command(cmd.name, args), cmd, peer.identity, ctx.estop.generation)
    ctx.events.add("command_started", name=cmd.name, client=peer.client_id)
    return None


def finish_backend_command(ctx: CommandContext) -> None:
    """Reply to a finished home / reset / recover (called by the I/O loop)."""
    run = ctx.busy.take_done()
    if run is None:
        return
    cmd = run.cmd
    try:
        message = run.future.result()
    except Exception as e:  # a failed home/recover is reported, not raised
        ctx.count(f"command_{cmd.name}_failed")
        ctx.events.add("command_failed", name=cmd.name, error=str(e))
        ctx.send(run.identity, Error(code="failed", message=f"{cmd.name} failed: {e}", ref_seq=cmd.seq))
        return
    if cmd.name == "reset":
        if ctx.estop.generation == run.estop_generation:
            ctx.estop.reset()
        else:  # a stop came while the reset ran: it latches anew
            message = f"{message}; a stop came meanwhile: e-stop latched again"
        ctx.link.clear()
    ctx.events.add("command_done", name=cmd.name)
    ctx.send(run.identity, ctx.status(ref_seq=cmd.seq, message=str(message)))


COMMANDS: dict[str, Callable[[CommandContext, Peer, Command, int], str | Error | None]] = {
    "status": cmd_status,
    "subscribe": cmd_subscribe,
    "unsubscribe": cmd_subscribe,
    "acquire_lease": cmd_acquire_lease,
    "release_lease": cmd_release_lease,
    "stop": cmd_stop,
    **{name: cmd_backend for name in BACKEND_COMMANDS},
}
