"""Typed, validated bridge settings (server on the robot PC, client on the learner).

Validated once at the edge: a bad value raises ``ConfigError`` naming the key and its allowed
range, so a typo in a launch YAML fails at start-up instead of as a silent wrong deadman.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlinf_robot.errors import ConfigError
from rlinf_robot.protocol import DEFAULT_MAX_BYTES
from rlinf_robot.settings import build, check, flag, integer, number, text


def endpoint_host(endpoint: str) -> str:
    """The host part of a ``tcp://host:port`` / ``ipc://`` / ``inproc://`` endpoint."""
    if not endpoint.startswith("tcp://"):
        return "localhost"
    rest = endpoint[len("tcp://") :]
    host = rest.rsplit(":", 1)[0] if ":" in rest else rest
    return host.strip("[]")


def is_loopback(endpoint: str) -> bool:
    """Whether an endpoint only accepts connections from this machine (no CURVE needed by default)."""
    if endpoint.startswith(("ipc://", "inproc://")):
        return True
    host = endpoint_host(endpoint)
    if host in ("localhost", "lo"):
        return True
    if host in ("*", "0.0.0.0", "::"):
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
        except OSError:
            return False


@dataclass(frozen=True)
class CurveServerKeys:
    """The robot's key pair (``zmq.auth`` secret certificate) and a directory of allowed client
    public keys (``*.key`` files). Keys added to the directory are picked up without a restart."""

    secret_file: Path
    authorized_dir: Path

    def __post_init__(self):
        object.__setattr__(self, "secret_file", Path(self.secret_file).expanduser())
        object.__setattr__(self, "authorized_dir", Path(self.authorized_dir).expanduser())


@dataclass(frozen=True)
class CurveClientKeys:
    """The learner's secret certificate and the robot's public key file."""

    secret_file: Path
    server_public_file: Path

    def __post_init__(self):
        object.__setattr__(self, "secret_file", Path(self.secret_file).expanduser())
        object.__setattr__(self, "server_public_file", Path(self.server_public_file).expanduser())


@dataclass(frozen=True)
class ServerConfig:
    """Robot-side settings.

    ``deadman_ms``: no valid chunk or heartbeat from the lease holder for this long -> hold.
    ``lease_timeout_ms``: no heartbeat for this long -> the lease is released (others may take it).
    ``max_obs_age_ms``: a chunk computed from an observation older than this is dropped as stale
    (this also bounds what a reconnecting client could replay from its send queue).
    CURVE is required for a non-loopback bind unless ``allow_insecure`` is set explicitly.
    ``io_thread_nice``: the I/O thread (which also runs the deadman) asks for this nice value, so a
    busy robot PC does not delay the hold; without the privilege (CAP_SYS_NICE) it keeps its own.
    """

    endpoint: str = "tcp://127.0.0.1:5555"
    deadman_ms: float = number(100.0, 0.0, 10_000.0, lo_open=True)
    lease_timeout_ms: float = number(1000.0, 0.0, 600_000.0, lo_open=True)
    obs_rate_hz: float = number(30.0, 0.0, 2000.0, lo_open=True)
    max_obs_age_ms: float = number(1000.0, 0.0, 600_000.0, lo_open=True)
    max_message_bytes: int = integer(DEFAULT_MAX_BYTES, 65_536, 2**31 - 1)
    send_hwm: int = integer(64, 1, 100_000)
    peer_timeout_s: float = number(10.0, 0.0, 3600.0, lo_open=True)
    obs_history: int = integer(512, 8, 1_000_000)
    curve: CurveServerKeys | None = None
    allow_insecure: bool = flag(False)
    name: str = text("robot")
    io_thread_nice: int = integer(-10, -20, 19)  # the I/O thread's nice value when permitted (0: leave it)

    def __post_init__(self):
        src = "bridge server config"
        if not isinstance(self.endpoint, str) or "://" not in self.endpoint:
            raise ConfigError(f"{src}: endpoint must look like tcp://HOST:PORT, got {self.endpoint!r}")
        check(self, src)
        if self.lease_timeout_ms < self.deadman_ms:
            raise ConfigError(
                f"{src}: lease_timeout_ms ({self.lease_timeout_ms}) must be >= deadman_ms ({self.deadman_ms})"
            )
        if isinstance(self.curve, dict):
            object.__setattr__(self, "curve", CurveServerKeys(**self.curve))
        if self.curve is None and not self.allow_insecure and not is_loopback(self.endpoint):
            raise ConfigError(
                f"{src}: endpoint {self.endpoint} is not loopback, so CURVE keys are required "
                "(curve.secret_file, curve.authorized_dir; see `rlinf-robot keys generate`), "
                "or set allow_insecure: true explicitly"
            )

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "bridge server config") -> ServerConfig:
        return build(cls, raw, source)


@dataclass(frozen=True)
class ClientConfig:
    """Learner-side settings.

    ``heartbeat_ms`` must stay well below the server's deadman (default 100 ms) so a busy moment
    on the learner does not stop the arm; ``link_timeout_ms`` without a heartbeat answer marks
    the link down (calls then raise ``LinkLost``). ZeroMQ reconnects by itself with exponential
    backoff from ``reconnect_ms`` to ``reconnect_max_ms``.
    """

    endpoint: str = "tcp://127.0.0.1:5555"
    client_id: str = text("")
    heartbeat_ms: float = number(20.0, 0.0, 10_000.0, lo_open=True)
    link_timeout_ms: float = number(500.0, 0.0, 600_000.0, lo_open=True)
    request_timeout_s: float = number(5.0, 0.0, 3600.0, lo_open=True)
    connect_timeout_s: float = number(10.0, 0.0, 3600.0, lo_open=True)
    reconnect_ms: int = integer(100, 1, 600_000)
    reconnect_max_ms: int = integer(5000, 1, 3_600_000)
    max_message_bytes: int = integer(DEFAULT_MAX_BYTES, 65_536, 2**31 - 1)
    curve: CurveClientKeys | None = None

    def __post_init__(self):
        src = "bridge client config"
        if not isinstance(self.endpoint, str) or "://" not in self.endpoint:
            raise ConfigError(f"{src}: endpoint must look like tcp://HOST:PORT, got {self.endpoint!r}")
        check(self, src)
        if self.link_timeout_ms <= self.heartbeat_ms:
            raise ConfigError(
                f"{src}: link_timeout_ms ({self.link_timeout_ms}) must be > heartbeat_ms ({self.heartbeat_ms})"
            )
        if self.reconnect_max_ms < self.reconnect_ms:
            raise ConfigError(
                f"{src}: reconnect_max_ms ({self.reconnect_max_ms}) must be >= reconnect_ms ({self.reconnect_ms})"
            )
        if "#" in self.client_id or len(self.client_id) > 200:
            raise ConfigError(f"{src}: client_id must be at most 200 characters without '#'")
        if isinstance(self.curve, dict):
            object.__setattr__(self, "curve", CurveClientKeys(**self.curve))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "bridge client config") -> ClientConfig:
        return build(cls, raw, source)
