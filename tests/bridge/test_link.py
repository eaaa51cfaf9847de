"""Link behaviour: the client notices a dead robot, reconnects by itself when it returns and restores
its subscription and lease; an oversized message is cut off by ZMQ_MAXMSGSIZE."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
import zmq

from rlinf_robot.bridge import BridgeServer, BridgeTimeout, ServerConfig
from rlinf_robot.errors import LinkLost
from rlinf_robot.protocol import Command, encode


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(cond, timeout=10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return False


def _leased_then_stopped(arm, make_client, linger_s: float = 0.0, **client_cfg):
    """A client holding the lease of a robot on a fixed port, which then stops: (config to start
    the robot again with, the client, its last observation)."""
    cfg = ServerConfig(endpoint=f"tcp://127.0.0.1:{free_port()}", obs_rate_hz=50.0)
    first = BridgeServer(arm, cfg).start()
    client = make_client(cfg.endpoint, **client_cfg)
    try:
        client.acquire_lease()
        before = client.observe(timeout=5)
        time.sleep(linger_s)
    finally:
        first.stop()
    return cfg, client, before


def _drives_the_new_robot(second, client, before, arm) -> None:
    """The client observes the restarted robot, holds its lease and moves the arm through it."""
    after = client.observe(timeout=5)
    assert after.stamp_ns > before.stamp_ns
    assert until(lambda: second.lease.holder == client.client_id)
    seq = client.send_chunk(np.full((1, 7), 0.01, np.float32), "joint_delta", 10.0, obs=after)
    client.observe(timeout=5, predicate=lambda o: o.chunk_seq >= seq and not o.chunk_active)
    assert len(arm.entries("apply")) == 1


@pytest.mark.slow
def test_client_reconnects_and_restores_subscription_and_lease(arm, make_client):
    cfg, client, before = _leased_then_stopped(
        arm, make_client, link_timeout_ms=200.0, reconnect_ms=50, reconnect_max_ms=200
    )
    assert until(lambda: not client.link_up)
    with pytest.raises(LinkLost):
        client.send_chunk(np.zeros((1, 7), np.float32), "joint_delta", 10.0, obs=before)
    with pytest.raises(LinkLost):
        client.observe(timeout=0.3)
    second = BridgeServer(arm, cfg).start()  # "the robot PC restarted"
    try:
        assert until(lambda: client.link_up)
        _drives_the_new_robot(second, client, before, arm)  # the subscription was restored by the client
    finally:
        second.stop()


@pytest.mark.slow
def test_a_robot_back_before_the_link_timeout_gets_the_subscription_and_lease_again(arm, make_client):
    """A bridge restarted faster than ``link_timeout_ms`` (the fault matrix's kill -9 of bridge_node
    once came back in well under its 500 ms): the client's link never looked down, so only the
    robot's heartbeat counter, starting again from 1, tells it that the new bridge knows nothing of
    its subscription and lease. It restates both, and its chunks move the arm again."""
    cfg, client, before = _leased_then_stopped(
        arm,
        make_client,
        linger_s=0.5,  # the first bridge's counter well past the second's first answers
        link_timeout_ms=5000.0,
        reconnect_ms=20,
        reconnect_max_ms=50,
    )
    second = BridgeServer(arm, cfg).start()
    try:
        _drives_the_new_robot(second, client, before, arm)  # no LinkLost: the link never looked down
    finally:
        second.stop()


def test_connecting_to_nothing_times_out_with_a_typed_error(make_client):
    with pytest.raises(BridgeTimeout):
        make_client(f"tcp://127.0.0.1:{free_port()}", connect_timeout_s=0.3)


def test_oversized_message_is_cut_off_and_the_server_carries_on(make_server, make_client, arm):
    server = make_server(max_message_bytes=256 * 1024)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(server.endpoint)
    try:
        sock.send_multipart(encode(Command(seq=1, name="status")))
        assert sock.poll(5000)  # connected and answered
        sock.recv_multipart()
        sock.send_multipart([encode(Command(seq=2, name="status"))[0], b"\0" * (1024 * 1024)])
        assert sock.poll(500) == 0  # dropped by ZeroMQ before it reached the server's code
    finally:
        sock.close(0)
        ctx.term()
    client = make_client(server)
    assert client.status().state == "IDLE" and arm.entries("apply") == []
