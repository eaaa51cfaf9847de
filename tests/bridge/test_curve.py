"""CURVE on the bridge: allow-listed learners work; unknown keys and plain clients get nothing and
move nothing; keys come from `rlinf-robot keys generate`."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import zmq

from rlinf_robot.bridge import BridgeTimeout, CurveClientKeys, CurveServerKeys, ServerConfig
from rlinf_robot.bridge.auth import apply_client_keys
from rlinf_robot.cli import main as cli
from rlinf_robot.errors import ConfigError
from rlinf_robot.protocol import ActionChunk, Command, encode


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
            sock.send_multipart(encode(msg))
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
