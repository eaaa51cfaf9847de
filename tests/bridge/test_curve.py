"""CURVE on the bridge: allow-listed learners work; unknown keys and plain clients get nothing and
move nothing; keys come from `rlinf-robot keys generate`."""

from __future__ import annotations

import contextlib
import shutil
import socket
import time

import numpy as np
import pytest
import zmq

from rlinf_robot.bridge import BridgeTimeout, CurveClientKeys, CurveServerKeys, ServerConfig
from rlinf_robot.bridge.auth import apply_client_keys
from rlinf_robot.cli import main as cli
from rlinf_robot.errors import ConfigError
from rlinf_robot.protocol import ActionChunk, Command, encode
from tests.integration.robot.probe import wait_until
from tests.support.tcp_proxy import TcpProxy


@pytest.fixture
def keys(tmp_path):
    for name, where in (("robot", "robot"), ("alice", "alice"), ("mallory", "mallory")):
        assert cli(["keys", "generate", str(tmp_path / where), "--name", name]) == 0
    allowed = tmp_path / "authorized"
    allowed.mkdir()
    shutil.copy(tmp_path / "alice" / "alice.key", allowed)
    return tmp_path


def client_keys(keys, name):
    return CurveClientKeys(keys / name / f"{name}.key_secret", keys / "robot" / "robot.key")


@pytest.fixture
def curve_server(make_server, keys):
    return make_server(curve=CurveServerKeys(keys / "robot" / "robot.key_secret", keys / "authorized"))


def test_keys_command_writes_a_private_secret(keys):
    secret = keys / "alice" / "alice.key_secret"
    assert secret.stat().st_mode & 0o777 == 0o600
    assert cli(["keys", "generate", str(keys / "alice"), "--name", "alice"]) == 1  # no silent overwrite


def test_allow_listed_learner_observes_and_moves_the_arm(curve_server, make_client, keys, arm):
    alice = make_client(curve_server, curve=client_keys(keys, "alice"))
    alice.acquire_lease()
    obs = alice.observe(timeout=5)
    seq = alice.send_chunk(np.full((2, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
    alice.observe(timeout=5, predicate=lambda o: o.chunk_seq >= seq and not o.chunk_active)
    assert len(arm.entries("apply")) >= 1


def _raw_attempt(endpoint: str, curve: CurveClientKeys | None) -> list:
    """A raw DEALER that sends a lease request, a subscribe and a chunk, and returns what came back."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    if curve is not None:
        apply_client_keys(sock, curve)
    sock.connect(endpoint)
    try:
        for msg in (
            Command(seq=1, name="acquire_lease"),
            Command(seq=2, name="subscribe"),
            ActionChunk(
                seq=3,
                obs_seq=1,
                control_mode="joint_delta",
                rate_hz=10.0,
                actions=np.full((2, 7), 0.05, np.float32),
            ),
        ):
            # A refused handshake can take the DEALER's only pipe away between two sends, and a
            # DEALER with no pipe blocks in send: what cannot be sent within a second is not sent.
            try:
                if not sock.poll(1000, zmq.POLLOUT):
                    break
                sock.send_multipart(encode(msg), zmq.NOBLOCK)
            except zmq.Again:
                break
        got = []
        while sock.poll(700):
            got.append(sock.recv_multipart())
        return got
    finally:
        sock.close(0)
        ctx.term()


def test_unknown_key_gets_nothing_and_moves_nothing(curve_server, make_client, keys, arm):
    with pytest.raises(BridgeTimeout):
        make_client(curve_server, curve=client_keys(keys, "mallory"), connect_timeout_s=1.0)
    assert _raw_attempt(curve_server.endpoint, client_keys(keys, "mallory")) == []
    assert arm.entries("apply") == [] and curve_server.lease.holder == ""
    refused = curve_server.events.wait("unauthorized", 5)
    mallory_public = (keys / "mallory" / "mallory.key").read_text()
    assert refused and refused[0].detail["key"] in mallory_public
    assert curve_server.status().counters["unauthorized"] >= 1


def test_plain_client_gets_nothing_from_a_curve_server(curve_server, make_client, arm):
    with pytest.raises(BridgeTimeout):
        make_client(curve_server, connect_timeout_s=1.0)
    assert _raw_attempt(curve_server.endpoint, None) == []
    assert arm.entries("apply") == []


def test_a_key_added_to_the_directory_is_accepted_without_restart(curve_server, make_client, keys):
    with pytest.raises(BridgeTimeout):
        make_client(curve_server, curve=client_keys(keys, "mallory"), connect_timeout_s=0.5)
    shutil.copy(keys / "mallory" / "mallory.key", keys / "authorized")
    assert make_client(curve_server, curve=client_keys(keys, "mallory")).status().state == "IDLE"


def test_non_loopback_bind_requires_curve_or_an_explicit_opt_out():
    with pytest.raises(ConfigError, match="CURVE"):
        ServerConfig(endpoint="tcp://0.0.0.0:5555")
    assert ServerConfig(endpoint="tcp://0.0.0.0:5555", allow_insecure=True).allow_insecure
    assert ServerConfig(endpoint="tcp://127.0.0.1:5555").curve is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("deadman_ms", 0),
        ("obs_rate_hz", 5000),
        ("lease_timeout_ms", 10),
        ("max_message_bytes", 10),
        ("bogus", 1),
    ],
)
def test_bad_server_config_names_the_key(key, value):
    with pytest.raises(ConfigError, match=key):
        ServerConfig.from_dict({key: value})


def test_a_key_revoked_while_connected_cuts_the_learner_off_and_frees_the_lease(
    curve_server, make_client, keys, arm
):
    """CURVE checks a key only at the handshake: deleting a learner's key file while it is connected
    and holding the lease must stop it anyway. It then gets nothing, moves nothing, the arm holds,
    and another learner can take the lease."""
    shutil.copy(keys / "mallory" / "mallory.key", keys / "authorized")  # allowed for now
    alice = make_client(curve_server, curve=client_keys(keys, "alice"), connect_timeout_s=5.0)
    alice.acquire_lease()
    obs = alice.observe(timeout=5)
    (keys / "authorized" / "alice.key").unlink()
    revoked = curve_server.events.wait("revoked", 5)
    assert revoked and any(e.detail["held_lease"] for e in revoked), revoked
    assert curve_server.lease.holder == ""
    applied = len(arm.entries("apply"))
    alice.send_chunk(np.full((3, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
    time.sleep(0.3)
    with contextlib.suppress(BridgeTimeout):
        alice.observe(timeout=0.3)  # what was on its way before the revocation
    with pytest.raises(BridgeTimeout):
        alice.observe(timeout=1.0)  # nothing more reaches it
    assert len(arm.entries("apply")) == applied
    mallory = make_client(curve_server, curve=client_keys(keys, "mallory"), connect_timeout_s=5.0)
    assert mallory.acquire_lease().lease_holder == mallory.client_id
    assert curve_server.status().counters["revoked"] >= 1


def test_replayed_frames_move_nothing_and_are_counted(curve_server, make_client, keys, arm):
    """Capture an allowed learner's session on the wire (handshake, lease, a chunk that moved the
    arm), then send the same bytes on a new connection: CURVE's per-connection keys make the copy
    worthless. Nothing moves, the lease stays free, the failed handshake is counted."""
    proxy = TcpProxy(int(curve_server.endpoint.rsplit(":", 1)[1]), record=True)
    try:
        alice = make_client(proxy.endpoint, curve=client_keys(keys, "alice"), connect_timeout_s=5.0)
        alice.acquire_lease()
        obs = alice.observe(timeout=5)
        seq = alice.send_chunk(np.full((2, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
        alice.observe(timeout=5, predicate=lambda o: o.chunk_seq >= seq and not o.chunk_active)
        alice.close()
    finally:
        proxy.close()
    captured = max((bytes(sent) for sent, _ in proxy.streams), key=len)  # the data socket's
    assert len(captured) > 1000 and b"acquire_lease" not in captured  # encrypted on the wire
    applied, failed = len(arm.entries("apply")), curve_server.status().counters.get("handshakes_failed", 0)
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", proxy.target[1]), timeout=5) as raw:
            raw.sendall(captured)
            time.sleep(0.5)
    assert wait_until(lambda: curve_server.status().counters.get("handshakes_failed", 0) >= failed + 3, 10)
    assert len(arm.entries("apply")) == applied and curve_server.lease.holder == ""


def test_a_flood_of_bad_connections_gets_nothing_and_the_learner_keeps_the_arm(
    curve_server, make_client, keys, arm
):
    """While an allowed learner drives the arm, 100 connections that send garbage and 20 CURVE
    clients with an unknown key: none gets an answer, each is counted as a connection that never
    authenticated, and the learner's chunks go on running."""
    alice = make_client(curve_server, curve=client_keys(keys, "alice"), connect_timeout_s=5.0)
    alice.acquire_lease()
    port = int(curve_server.endpoint.rsplit(":", 1)[1])
    start = curve_server.status().counters
    before = start.get("connections_accepted", 0) - start.get("handshakes_succeeded", 0)
    raws = []
    for i in range(100):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(bytes([i % 256]) * 200)
        raws.append(s)
    assert all(_raw_attempt(curve_server.endpoint, client_keys(keys, "mallory")) == [] for _ in range(20))
    obs = alice.observe(timeout=5)
    applied = len(arm.entries("apply"))
    seq = alice.send_chunk(np.full((3, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
    alice.observe(timeout=5, predicate=lambda o: o.chunk_seq >= seq and not o.chunk_active)
    assert len(arm.entries("apply")) > applied
    for s in raws:
        s.settimeout(0.05)
        with contextlib.suppress(TimeoutError, OSError):
            got = s.recv(4096)
            assert not got or got.startswith(b"\xff"), got  # at most ZMTP's own greeting
        s.close()

    def never_authenticated() -> int:
        c = curve_server.status().counters
        return c.get("connections_accepted", 0) - c.get("handshakes_succeeded", 0) - before

    assert wait_until(lambda: never_authenticated() >= 120, 15), curve_server.status().counters
    assert curve_server.lease.holder == alice.client_id
