"""docs/protocol.md, checked through the wire: an independent client (``tests/bridge/wire.py``: pyzmq +
msgpack, none of our client code) against a real ``BridgeServer``. Each test is one rule of the doc;
the issue-14 defects each have one that failed before they were fixed."""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
import time

import msgpack
import numpy as np
import pytest
import zmq

from rlinf_robot.bridge import CurveServerKeys, KinematicArm
from rlinf_robot.bridge.latency import SPANS
from rlinf_robot.bridge.stream_backend import CommandSinks, StreamBackend
from rlinf_robot.cli import main as cli
from rlinf_robot.paths import REPO_ROOT
from rlinf_robot.robot.franka.model import HOME_Q, tcp_pose
from tests.bridge.wire import WireClient, curve_keys, frames_of, pack, zmtp_messages

MS = 1_000_000
DOC = (REPO_ROOT / "docs" / "protocol.md").read_text()


def until(cond, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout:g} s")
        time.sleep(0.005)


def status(c: WireClient) -> dict:
    st = c.command("status")
    assert st["type"] == "status", st
    return st


def done(seq):
    """An observation captured after chunk ``seq`` ended."""
    return lambda o: o.get("chunk_seq", -1) >= seq and not o.get("chunk_active", False)


@pytest.fixture
def wire():
    clients = []

    def make(server, client_id="wire", **kw) -> WireClient:
        c = WireClient(server.endpoint, client_id, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def controller(make, server, client_id="pilot") -> tuple[WireClient, dict]:
    """A client with the lease, a heartbeat thread, a subscription and a first observation."""
    c = make(server, client_id, heartbeat_s=0.02)
    assert c.command("acquire_lease")["type"] == "status"
    assert c.command("subscribe")["type"] == "status"
    return c, c.latest()


class Arm(KinematicArm):
    """The in-memory arm, plus what a real controller does: a fault state that ``recover`` /
    ``reset`` clear, commands that block until ``gate`` opens, and a state that can go missing."""

    def __init__(self):
        super().__init__(images={"front": np.zeros((6, 8, 3), np.uint8)})
        self.gate = threading.Event()
        self.gate.set()
        self.no_state = False

    def state(self):
        return None if self.no_state else super().state()

    def run_command(self, name, args):
        if not self.gate.wait(30):
            raise RuntimeError(f"{name} timed out")
        if name in ("recover", "reset"):
            self.fault = None
        return super().run_command(name, args)


@pytest.fixture
def arm():
    return Arm()


# ---------------------------------------------------------------- issue 14.1: reset / recover / home
class Driver:
    """franka_node as the bridge sees it: services that answer at once, and a state machine whose
    state reaches the bridge only with the next /diagnostics report (5 Hz)."""

    def __init__(self, backend_box: list):
        self.state = "ACTIVE"
        self.box = backend_box
        self._stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._stream, daemon=True),
            threading.Thread(target=self._diagnostics, daemon=True),
        ]

    def sinks(self) -> CommandSinks:
        def call(name):  # what franka_node's services answer
            if name != "reset" and self.state in ("ESTOP", "LATCHED"):
                return False, f"the arm is {self.state}: only reset clears it"
            self.state = "ACTIVE"
            return True, f"{name}: arm is ACTIVE"

        def stop():
            self.state = "ESTOP"

        return CommandSinks(lambda q, g: None, lambda p: None, call, stop, lambda: None)

    def start(self):
        for t in self.threads:
            t.start()

    def close(self):
        self._stop.set()
        for t in self.threads:
            t.join(2)

    def _stream(self):  # joint states at 100 Hz
        while not self._stop.wait(0.01):
            self.box[0].on_arm(HOME_Q, np.zeros(7), tcp_pose(HOME_Q), 0.04, time.time_ns())

    def _diagnostics(self):  # the state machine at 5 Hz, stamped when published
        while not self._stop.wait(0.2):
            self.box[0].on_arm_state(self.state, time.time_ns())


@pytest.fixture
def driven(make_server):
    box = []
    driver = Driver(box)
    box.append(StreamBackend(driver.sinks(), state_max_age_s=0.5))
    driver.start()
    yield driver, box[0], make_server(box[0])
    driver.close()


@pytest.mark.parametrize("command", ["reset", "recover", "home"])
def test_a_command_replies_once_the_arm_takes_chunks_again(driven, wire, command):
    """Issue 14.1: `reset` answered ~0.05 s after it was sent, with `state: ESTOP`, while the arm's
    state only reached the bridge 0.2-0.45 s later; a chunk sent on the reply was refused. The reply
    must come when the arm accepts chunks, carrying the state it is in."""
    driver, backend, server = driven
    c, obs = controller(wire, server)
    before = {"reset": "ESTOP", "recover": "REFLEX", "home": "ACTIVE"}[command]
    if command == "reset":
        assert c.command("stop")["state"] == "ESTOP"
    else:
        driver.state = before
    until(
        lambda: backend.fault_state() == (None if before == "ACTIVE" else before),
        5,
        f"the arm reporting {before}",
    )
    reply = c.command(command, timeout=10)
    assert reply["type"] == "status", reply
    assert reply["state"] == "HOLD", reply  # not the arm's stale state
    # and a chunk sent right on the reply is taken
    obs = c.latest()
    seq = c.chunk(np.full((1, 7), 0.01, np.float32), "joint_delta", 20.0, obs["seq"])
    end = c.observation(done(seq), timeout=5)
    assert end["chunk_report"]["applied"] == 1, end["chunk_report"]
    assert c.errors(seq) == []


def test_an_estop_on_the_arm_refuses_chunks_as_latched(driven, wire):
    """Issue 14.1: an e-stop pressed at the arm (franka_node's own /franka/stop) was answered with
    `fault`, which the doc reserves for REFLEX / RECOVERING / LATCHED."""
    driver, backend, server = driven
    c, obs = controller(wire, server)
    driver.state = "ESTOP"
    until(lambda: backend.fault_state() == "ESTOP", 5, "the arm reporting ESTOP")
    assert status(c)["state"] == "ESTOP"
    seq = c.chunk(np.zeros((1, 7), np.float32), "joint_delta", 20.0, c.latest()["seq"])
    err = c.wait(lambda m: m["type"] == "error" and m["ref_seq"] == seq, 5, "the refusal")
    assert err["code"] == "latched", err
    assert c.command("home")["code"] == "latched"


def test_busy_while_a_command_runs_and_stop_still_works(make_server, wire, arm):
    server = make_server(arm)
    c, obs = controller(wire, server)
    for command in ("reset", "recover"):
        arm.gate.clear()
        t0 = time.monotonic_ns()
        seq = c.send({"type": "command", "name": command})
        assert server.events.wait("command_started", 5, since_ns=t0), f"{command} never started"
        chunk = c.chunk(np.zeros((1, 7), np.float32), "joint_delta", 20.0, c.latest()["seq"])
        for answer, ref in (
            (c.wait(lambda m, s=chunk: m.get("ref_seq") == s, 5), chunk),
            (c.command("home"), None),
            (c.command(command), None),
        ):
            assert answer["type"] == "error" and answer["code"] == "busy", answer
            assert ref is None or answer["ref_seq"] == ref
        assert c.command("stop")["state"] == "ESTOP"  # an e-stop never waits
        arm.gate.set()
        reply = c.wait(lambda m, s=seq: m.get("ref_seq") == s, 10, f"the {command} reply")
        # done, and the stop pressed meanwhile still holds: not even a reset clears a newer stop
        assert reply["type"] == "status" and reply["state"] == "ESTOP", reply
        assert c.command("recover")["code"] == "latched"  # an e-stop needs a reset, not a recover
        assert c.command("reset")["state"] == "HOLD"


# ---------------------------------------------------------------- issue 14.2: observers
def test_a_silent_subscriber_is_told_it_was_dropped_and_counted(make_server, wire):
    """Issue 14.2: a subscriber that never sent anything after `subscribe` stopped receiving after
    ~10 s, with no status, error or counter. A subscription lasts while the client talks (any
    message at least every peer_timeout_s); a dropped one is told so and counted."""
    server = make_server(peer_timeout_s=1.0)
    silent = wire(server, "silent")
    beating = wire(server, "beating", heartbeat_s=0.05)
    for c in (silent, beating):
        assert c.command("subscribe")["type"] == "status"
    t0 = time.monotonic()
    silent.observation(timeout=5)
    dropped = silent.wait(lambda m: m["type"] == "error" and m["code"] == "dropped", 10, "the drop notice")
    assert dropped["ref_seq"] == -1 and "subscribe" in dropped["message"], dropped
    assert time.monotonic() - t0 >= 0.9  # not before peer_timeout_s
    silent.discard("observation")
    silent.pump(0.5)
    assert not any(m["type"] == "observation" for m in silent.inbox), "observations after the drop"
    # the one that heartbeats is still served, well past the timeout, and sees the counter
    first = beating.observation(timeout=5)["seq"]
    time.sleep(1.5)
    assert beating.latest()["seq"] > first
    counters = status(beating)["counters"]
    assert counters["subscribers_dropped"] == 1 and counters["peers_dropped"] >= 1, counters
    # subscribing again works
    assert silent.command("subscribe")["type"] == "status"
    silent.observation(timeout=5)


# ---------------------------------------------------------------- issue 14.4: the per-chunk notice
def test_a_big_step_is_scaled_and_the_chunks_report_says_so(make_server, wire, arm):
    """Issue 14.4: a 0.6 rad one-step joint_delta was scaled to the per-tick limit without a word.
    The observations' `chunk_report` for that chunk's seq is the notice."""
    server = make_server(arm)
    c, obs = controller(wire, server)
    step = np.zeros((1, 7), np.float32)
    step[0, 0] = 0.6
    seq = c.chunk(step, "joint_delta", 10.0, obs["seq"])
    end = c.observation(done(seq), timeout=10)
    assert end["chunk_seq"] == seq
    report = end["chunk_report"]
    assert report["rows"] == 1 and report["applied"] == 1 and report["scaled"] == 1, report
    assert report["clamped"] == 0, report
    moved = end["joint_pos"] - obs["joint_pos"]
    assert 0 < moved[0] <= 0.05 + 1e-9 and np.allclose(moved[1:], 0), moved  # the per-tick cap at 10 Hz
    assert end["chunk_trace"].shape == (1, 15)
    np.testing.assert_allclose(end["chunk_trace"][0, :7], end["joint_pos"])
    assert c.errors(seq) == []  # scaling is not an error: the report is the notice


def test_each_delta_row_is_relative_to_the_previous_rows_target(make_server, wire, arm):
    server = make_server(arm)
    c, obs = controller(wire, server)
    rows = np.zeros((3, 7), np.float32)
    rows[:, 1] = [0.01, 0.02, -0.005]
    seq = c.chunk(rows, "joint_delta", 20.0, obs["seq"])
    end = c.observation(done(seq), timeout=10)
    np.testing.assert_allclose(
        end["chunk_trace"][:, 1] - obs["joint_pos"][1], np.cumsum(rows[:, 1]), atol=1e-6
    )
    # ee_delta: dxyz in the base frame, from the TCP of the previous row's target
    ee = np.zeros((2, 6), np.float32)
    ee[:, 2] = -0.01
    seq = c.chunk(ee, "ee_delta", 20.0, end["seq"])
    after = c.observation(done(seq), timeout=10)
    np.testing.assert_allclose(after["ee_pose"][:3] - end["ee_pose"][:3], [0, 0, -0.02], atol=2e-4)


# ---------------------------------------------------------------- issue 14.5: ref_seq on every error
def _chunk(**over):
    h = {"type": "action_chunk", "v": 1, "obs_seq": 0, "control_mode": "joint_delta", "rate_hz": 20.0}
    h.update(over)
    return h


def _ref(dtype="<f4", shape=(1, 7), frame=1):
    return {"dtype": dtype, "shape": list(shape), "frame": frame}


def _without(header: dict, key: str) -> dict:
    return {k: v for k, v in header.items() if k != key}


ZEROS = np.zeros((1, 7), np.float32).tobytes()
#: name -> (frames for a given seq and observation seq, code, field or None to skip the check)
BAD = {
    "wrong width": (
        lambda s, o: [pack(_chunk(seq=s, obs_seq=o, actions=_ref(shape=(1, 6)))), bytes(24)],
        "malformed",
        "$.actions",
    ),
    "int dtype": (
        lambda s, o: [pack(_chunk(seq=s, obs_seq=o, actions=_ref("<i4"))), ZEROS],
        "malformed",
        "$.actions",
    ),
    "H = 0": (
        lambda s, o: [pack(_chunk(seq=s, obs_seq=o, actions=_ref(shape=(0, 7)))), b""],
        "malformed",
        "$.actions",
    ),
    "bad control_mode": (
        lambda s, o: [pack(_chunk(seq=s, obs_seq=o, control_mode="warp", actions=_ref())), ZEROS],
        "malformed",
        "$.control_mode",
    ),
    "rate_hz 0": (
        lambda s, o: [pack(_chunk(seq=s, obs_seq=o, rate_hz=0.0, actions=_ref())), ZEROS],
        "malformed",
        "$.rate_hz",
    ),
    "rate_hz 5000": (
        lambda s, o: [pack(_chunk(seq=s, obs_seq=o, rate_hz=5000.0, actions=_ref())), ZEROS],
        "malformed",
        "$.rate_hz",
    ),
    "truncated payload": (
        lambda s, o: [pack(_chunk(seq=s, obs_seq=o, actions=_ref())), ZEROS[:-4]],
        "malformed",
        "$.actions",
    ),
    "extra frame": (
        lambda s, o: [pack(_chunk(seq=s, obs_seq=o, actions=_ref())), ZEROS, b"x"],
        "malformed",
        None,
    ),
    "missing field": (
        lambda s, o: [pack(_without(_chunk(seq=s, actions=_ref()), "obs_seq")), ZEROS],
        "malformed",
        "$.obs_seq",
    ),
    "unknown type": (lambda s, o: [pack({"type": "teleport", "v": 1, "seq": s})], "malformed", "$.type"),
    "version 2": (
        lambda s, o: [pack(_chunk(seq=s, obs_seq=o, v=2, actions=_ref())), ZEROS],
        "version",
        "$.v",
    ),
    "unknown command": (
        lambda s, o: [pack({"type": "command", "v": 1, "seq": s, "name": "selfdestruct"})],
        "malformed",
        "$.name",
    ),
    "bad command args": (
        lambda s, o: [pack({"type": "command", "v": 1, "seq": s, "name": "home", "args": {"a": [1]}})],
        "malformed",
        None,
    ),
    "client-sent status": (
        lambda s, o: [pack({"type": "status", "v": 1, "seq": s, "stamp_ns": 1, "state": "IDLE"})],
        "refused",
        "$.type",
    ),
    "client-sent observation": (
        lambda s, o: frames_of(
            {"type": "observation", "v": 1, "seq": s, "stamp_ns": 1},
            {"joint_pos": np.zeros(7), "joint_vel": np.zeros(7), "ee_pose": np.zeros(7)},
        ),
        "refused",
        "$.type",
    ),
    "heartbeat of another socket": (
        lambda s, o: [pack({"type": "heartbeat", "v": 1, "seq": s, "stamp_ns": 1, "sender": "pilot#hb"})],
        "refused",
        "$.sender",
    ),
    "NaN": (
        lambda s, o: frames_of(_chunk(seq=s, obs_seq=o), {"actions": np.full((1, 7), np.nan, np.float32)}),
        "unsafe",
        "$.actions",
    ),
    "unknown observation": (
        lambda s, o: frames_of(_chunk(seq=s, obs_seq=o + 10**6), {"actions": np.zeros((1, 7))}),
        "unknown_obs",
        None,
    ),
    "first action time past": (
        lambda s, o: frames_of(
            _chunk(seq=s, obs_seq=o, first_action_time_ns=1), {"actions": np.zeros((1, 7))}
        ),
        "late",
        None,
    ),
}


def test_every_error_carries_the_seq_it_answers(make_server, wire, arm):
    """Issue 14.5: `ref_seq` was -1 for 21 kinds of error on headers with a readable integer seq.
    Also the codes and `field`s the doc promises for each."""
    server = make_server(arm)
    c, obs = controller(wire, server)
    wrong = []
    for i, (name, (build, code, field)) in enumerate(BAD.items()):
        seq = 1000 + i
        c.send_frames(build(seq, obs["seq"]))
        err = c.maybe(lambda m, s=seq: m["type"] == "error" and m["ref_seq"] == s, 5)
        if err is None or err["code"] != code or (field is not None and err["field"] != field):
            other = [m for m in c.inbox if m["type"] == "error"][-3:]
            wrong.append((name, err, other))
    assert not wrong, "\n".join(f"{n}: got {e}; recent errors {o}" for n, e, o in wrong)
    assert arm.entries("apply") == []
    # a chunk from a client without the lease, and a stale one
    other = wire(server, "other")
    seq = other.chunk(np.zeros((1, 7), np.float32), "joint_delta", 20.0, obs["seq"], seq=77)
    assert other.wait(lambda m: m.get("ref_seq") == seq, 5)["code"] == "refused"


def test_old_seq_is_judged_against_the_last_accepted_chunk(make_server, wire, arm):
    server = make_server(arm)
    c, obs = controller(wire, server)
    z = np.zeros((1, 7), np.float32)
    c.chunk(z, "joint_delta", 20.0, obs["seq"], seq=10)
    c.observation(done(10), timeout=5)
    assert c.errors() == []
    c.chunk(z, "joint_delta", 20.0, obs["seq"] + 10**6, seq=20)  # dropped: unknown observation
    assert c.wait(lambda m: m.get("ref_seq") == 20, 5)["code"] == "unknown_obs"
    obs = c.latest()
    for seq, code in ((10, "old_seq"), (5, "old_seq")):
        c.chunk(z, "joint_delta", 20.0, obs["seq"], seq=seq)
        assert c.wait(lambda m, s=seq: m.get("ref_seq") == s, 5)["code"] == code
    c.chunk(z, "joint_delta", 20.0, obs["seq"], seq=15)  # newer than 10, the last *accepted*: taken
    c.observation(done(15), timeout=5)
    assert c.errors(15) == []


# ---------------------------------------------------------------- heartbeats, states, lease
def test_heartbeat_sender_is_the_client_id_or_empty(make_server, wire):
    server = make_server()
    c = wire(server, "pilot")
    for sender in ("pilot", ""):
        seq = c.heartbeat(sender)
        beat = c.wait(lambda m, s=seq: m["type"] == "heartbeat" or m.get("ref_seq") == s, 5)
        assert beat["type"] == "heartbeat" and beat["sender"] == server.config.name, beat
    for sender in ("pilot#hb", "someone-else"):
        seq = c.heartbeat(sender)
        err = c.wait(lambda m, s=seq: m["type"] in ("heartbeat", "error") and m.get("ref_seq", s) == s, 5)
        assert err["type"] == "error" and err["code"] == "refused" and err["field"] == "$.sender", err
    # the heartbeat socket's own heartbeats (sender = the client id) are answered on that socket
    c.start_heartbeats(0.02)
    time.sleep(0.2)
    assert c.heartbeat_errors == []


def test_states_through_a_session(make_server, wire, arm):
    """IDLE at start; HOLD with a holder; ACTIVE while a chunk runs; ESTOP until reset; LINK_LOST
    from the deadman (an unsolicited status) until the holder talks again; after a lease lapse
    (another unsolicited status) LINK_LOST stays, with no holder, until someone acquires."""
    server = make_server(arm, deadman_ms=400.0, lease_timeout_ms=1200.0)
    watcher = wire(server, "watcher", heartbeat_s=0.05)
    assert watcher.command("subscribe")["state"] == "IDLE"
    c, obs = controller(wire, server)
    assert status(c)["state"] == "HOLD"
    seq = c.chunk(np.full((30, 7), 1e-4, np.float32), "joint_delta", 10.0, obs["seq"])
    assert status(c)["state"] == "ACTIVE"
    c.observation(done(seq), timeout=10)
    assert status(c)["state"] == "HOLD"
    assert c.command("stop")["state"] == "ESTOP" and status(c)["state"] == "ESTOP"
    assert c.command("reset")["state"] == "HOLD"
    c.stop_heartbeats()  # the holder goes quiet
    lost = watcher.wait(lambda m: m["type"] == "status" and m["state"] == "LINK_LOST", 5, "LINK_LOST status")
    assert lost["ref_seq"] == -1 and lost["lease_holder"] == "pilot"
    c.heartbeat()  # on the data socket: the holder is back
    assert status(c)["state"] == "HOLD"
    watcher.wait(lambda m: m["type"] == "status" and m["state"] == "LINK_LOST", 5, "LINK_LOST again")
    lapsed = watcher.wait(lambda m: m["type"] == "status" and m["lease_holder"] == "", 5, "the lease lapse")
    assert lapsed["state"] == "LINK_LOST" and lapsed["ref_seq"] == -1, lapsed
    assert status(watcher)["state"] == "LINK_LOST"
    assert watcher.command("acquire_lease")["state"] == "HOLD"


def test_reflex_refuses_chunks_with_fault_until_recover(make_server, wire, arm):
    server = make_server(arm)
    c, obs = controller(wire, server)
    arm.fault = "REFLEX"
    assert status(c)["state"] == "REFLEX"
    seq = c.chunk(np.zeros((1, 7), np.float32), "joint_delta", 20.0, c.latest()["seq"])
    assert c.wait(lambda m: m.get("ref_seq") == seq, 5)["code"] == "fault"
    assert c.command("recover")["state"] == "HOLD"
    seq = c.chunk(np.full((1, 7), 0.01, np.float32), "joint_delta", 20.0, c.latest()["seq"])
    assert c.observation(done(seq), timeout=5)["chunk_report"]["applied"] == 1


def test_no_state_refuses_and_holds(make_server, wire, arm):
    server = make_server(arm)
    c, obs = controller(wire, server)
    arm.no_state = True
    seq = c.chunk(np.zeros((1, 7), np.float32), "joint_delta", 20.0, obs["seq"])  # anchored at acceptance
    assert c.wait(lambda m: m.get("ref_seq") == seq, 5)["code"] == "no_state"
    seq = c.chunk(HOME_Q[None].astype(np.float32), "joint_position", 20.0, c.latest()["seq"])
    assert c.wait(lambda m: m.get("ref_seq") == seq, 5)["code"] == "no_state"  # refused at its step
    assert arm.entries("apply") == [] and arm.entries("hold")


def test_a_stale_sensor_is_named_and_its_data_left_out(make_server, wire):
    backend = StreamBackend(
        CommandSinks(lambda q, g: None, lambda p: None, lambda n: (True, n), lambda: None, lambda: None),
        cameras=["front"],
        state_max_age_s=0.2,
        camera_max_age_s=0.2,
    )
    backend.on_arm(HOME_Q, np.zeros(7), tcp_pose(HOME_Q), 0.04, time.time_ns())
    backend.on_image("front", np.zeros((4, 4, 3), np.uint8), time.time_ns())
    server = make_server(backend)
    c = wire(server, heartbeat_s=0.05)
    c.command("subscribe")
    assert "front" in c.observation(timeout=5)["images"]
    stale = c.observation(lambda o: len(o["stale"]) == 2, timeout=5)
    assert stale["stale"] == ["joint_states", "front"] and stale["images"] == {}, stale
    c.command("acquire_lease")
    seq = c.chunk(np.zeros((1, 7), np.float32), "joint_delta", 20.0, stale["seq"])
    assert c.wait(lambda m: m.get("ref_seq") == seq, 5)["code"] == "no_state"


# ---------------------------------------------------------------- what a status carries
def _documented_counters() -> list[re.Pattern]:
    section = DOC.split("### Counters", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^\| `([a-z_<>]+)`", section, re.M)
    assert names, "no counter table in docs/protocol.md"
    return [re.compile("^" + re.sub(r"<[a-z_]+>", "[a-z_]+", n) + "$") for n in names]


def test_status_carries_documented_counters_and_latency_spans(make_server, wire, arm):
    server = make_server(arm)
    c, obs = controller(wire, server)
    seq = c.chunk(
        np.full((2, 7), 0.01, np.float32),
        "joint_delta",
        20.0,
        obs["seq"],
        hops={k: v for k, v in obs["hops"].items()}
        | {"obs_received": time.time_ns(), "action_sent": time.time_ns()},
    )
    c.observation(done(seq), timeout=5)
    c.chunk(np.zeros((1, 7), np.float32), "joint_delta", 20.0, obs["seq"], seq=1)  # old_seq
    c.command("stop")
    c.command("reset")
    st = status(c)
    patterns = _documented_counters()
    undocumented = [k for k in st["counters"] if not any(p.match(k) for p in patterns)]
    assert not undocumented, f"counters missing from docs/protocol.md: {undocumented}"
    assert set(st["latency_ms"]) <= set(SPANS) and {"end_to_end", "obs_to_action"} <= set(st["latency_ms"])
    for span, pct in st["latency_ms"].items():
        assert set(pct) == {"p50", "p90", "p99", "max", "n"}, (span, pct)
        assert f"`{span}`" in DOC


# ---------------------------------------------------------------- CURVE
@pytest.fixture
def keys(tmp_path):
    for name in ("robot", "alice", "mallory"):
        assert cli(["keys", "generate", str(tmp_path / name), "--name", name]) == 0
    (tmp_path / "authorized").mkdir()
    shutil.copy(tmp_path / "alice" / "alice.key", tmp_path / "authorized")
    return tmp_path


def test_curve_an_unknown_key_gets_nothing_and_is_counted(make_server, wire, keys):
    server = make_server(curve=CurveServerKeys(keys / "robot" / "robot.key_secret", keys / "authorized"))
    server_public, _ = curve_keys(keys / "robot" / "robot.key")

    def client(name):
        public, secret = curve_keys(keys / name / f"{name}.key", keys / name / f"{name}.key_secret")
        return wire(server, name, curve=(server_public, public, secret))

    alice, mallory, plain = client("alice"), client("mallory"), wire(server, "plain")
    assert status(alice)["state"] == "IDLE"
    for c in (mallory, plain):
        with contextlib.suppress(zmq.Again):  # between failed handshakes there is no connection at all
            c.send({"type": "command", "name": "acquire_lease"})
        c.pump(1.0)
        assert list(c.inbox) == []  # no handshake: not even an error comes back
    assert status(alice)["lease_holder"] == ""
    until(lambda: status(alice)["counters"].get("unauthorized", 0) >= 1, 5, "the refusal counted")


def test_a_reply_is_not_lost_behind_unread_observations(make_server, wire):
    """A subscriber that stops reading fills its queues with observations; ZeroMQ's ROUTER then
    drops what does not fit, so the reply to its next command was lost and the client waited in
    vain (seen as "no reply to 'status'" after a learner left a subscription unread for minutes).
    The server keeps such a reply and sends it ahead of any further observation."""
    rng = np.random.default_rng(1)
    server = make_server(
        KinematicArm(images={"front": rng.integers(0, 255, (240, 320, 3), np.uint8)}),
        obs_rate_hz=100.0,
        send_hwm=2,
    )
    c = wire(server, "slow", heartbeat_s=0.05)
    c.sock.close(0)  # a data socket that queues two messages at most (set before it connects)
    sock = c.ctx.socket(zmq.DEALER)
    sock.linger, sock.rcvhwm, sock.routing_id = 0, 2, b"slow"
    sock.connect(server.endpoint)
    c.sock = sock
    assert c.command("subscribe")["type"] == "status"
    time.sleep(3.0)  # 23 MB/s of observations unread: the queues and the socket buffers fill up
    seq = c.send({"type": "command", "name": "status", "args": {}})
    time.sleep(0.5)  # the reply is due while everything is still full
    reply = c.wait(lambda m: m.get("ref_seq") == seq, 30, "the status reply")
    assert reply["type"] == "status", reply
    counters = status(c)["counters"]
    assert counters["replies_delayed"] >= 1 and counters["obs_dropped"] > 0, counters
    assert counters.get("replies_lost", 0) == 0, counters


# ---------------------------------------------------------------- what travels on the socket
def test_every_byte_on_the_wire_is_msgpack_headers_and_raw_arrays(make_server, arm):
    """No pickle on the network path, checked on the bytes the socket carried rather than in the
    source: a learner session (subscribe, lease, observations with an image, a chunk, its errors,
    commands and statuses, heartbeats) recorded on the TCP link, split into ZMTP frames, and every
    message read with plain msgpack: its first frame a msgpack map with a ``type``, every other
    frame exactly the bytes of an array that map references. There is no room left for anything
    else."""
    from rlinf_robot.bridge import BridgeClient, ClientConfig
    from tests.support.tcp_proxy import TcpProxy

    server = make_server(arm)
    proxy = TcpProxy(int(server.endpoint.rsplit(":", 1)[1]), record=True)
    try:
        c = BridgeClient(ClientConfig(endpoint=proxy.endpoint, client_id="learner")).connect()
        c.acquire_lease()
        obs = c.observe(timeout=5)
        seq = c.send_chunk(np.full((3, 7), 0.01, np.float32), "joint_delta", 20.0, obs=obs)
        c.observe(timeout=5, predicate=lambda o: o.chunk_seq >= seq and not o.chunk_active)
        c.send_chunk(np.full((2, 7), 0.01, np.float32), "joint_delta", 20.0, obs=obs)  # old obs: fine
        c.status()
        c.close()
    finally:
        proxy.close()
    seen = set()
    assert len(proxy.streams) == 2  # the client's data and heartbeat sockets
    for direction in (bytes(d) for stream in proxy.streams for d in stream):
        for frames in zmtp_messages(direction):
            header = msgpack.unpackb(frames[0], raw=False)
            assert isinstance(header, dict) and isinstance(header.get("type"), str), header
            seen.add(header["type"])
            refs = [v for v in _walk(header) if isinstance(v, dict) and set(v) == {"dtype", "shape", "frame"}]
            assert sorted(r["frame"] for r in refs) == list(range(1, len(frames))), (header["type"], refs)
            for r in refs:
                size = int(np.prod(r["shape"])) * np.dtype(r["dtype"]).itemsize
                assert len(frames[r["frame"]]) == size, (header["type"], r)
    assert {"observation", "action_chunk", "command", "status", "heartbeat"} <= seen, seen


def _walk(value):
    yield value
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)
