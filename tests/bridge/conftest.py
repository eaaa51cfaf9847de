"""Fixtures: a real BridgeServer on a free loopback port over an in-memory arm, and real clients."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.bridge import BridgeClient, BridgeServer, KinematicArm, ServerConfig


@pytest.fixture
def arm():
    rng = np.random.default_rng(0)
    return KinematicArm(
        images={"front": rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)}, instruction="reach"
    )


@pytest.fixture
def make_server(arm):
    servers = []

    def make(backend=None, **cfg) -> BridgeServer:
        cfg.setdefault("endpoint", "tcp://127.0.0.1:*")
        cfg.setdefault("obs_rate_hz", 100.0)
        # Tests about something else must not trip the 100 ms deadman when the shared CPUs starve
        # a client's heartbeat thread; the deadman tests set it explicitly.
        cfg.setdefault("deadman_ms", 1000.0)
        cfg.setdefault("lease_timeout_ms", max(5000.0, cfg["deadman_ms"]))
        srv = BridgeServer(backend or arm, ServerConfig(**cfg)).start()
        servers.append(srv)
        return srv

    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def server(make_server):
    return make_server()


@pytest.fixture
def make_client():
    clients = []

    def make(server_or_endpoint, **cfg) -> BridgeClient:
        endpoint = getattr(server_or_endpoint, "endpoint", server_or_endpoint)
        cfg.setdefault("connect_timeout_s", 5.0)
        cfg.setdefault("link_timeout_ms", 2000.0)
        c = BridgeClient(endpoint=endpoint, **cfg).connect()
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def client(server, make_client):
    return make_client(server)
