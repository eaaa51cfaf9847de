"""Typed, validated bridge settings (server on the robot PC, client on the learner).

Validated once at the edge: a bad value raises ``ConfigError`` naming the key and its allowed
range, so a typo in a launch YAML fails at start-up instead of as a silent wrong deadman.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rlinf_robot.errors import ConfigError
from rlinf_robot.protocol import DEFAULT_MAX_BYTES


def _check_range(source: str, key: str, value: float, lo: float, hi: float, lo_open: bool = True) -> None:
    ok = (value > lo if lo_open else value >= lo) and value <= hi
    if not ok:
        bracket = "(" if lo_open else "["
        raise ConfigError(f"{source}: {key} must be in {bracket}{lo}, {hi}], got {value!r}")


def _from_dict(cls, raw: dict[str, Any], source: str):
    known = {f.name for f in fields(cls)}
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
    try:
        return cls(**raw)
    except TypeError as e:  # wrong types surface here as well
        raise ConfigError(f"{source}: {e}") from None


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
    deadman_ms: float = 100.0
    lease_timeout_ms: float = 1000.0
    obs_rate_hz: float = 30.0
    max_obs_age_ms: float = 1000.0
    max_message_bytes: int = DEFAULT_MAX_BYTES
    send_hwm: int = 64
    peer_timeout_s: float = 10.0
    obs_history: int = 512
    curve: CurveServerKeys | None = None
    allow_insecure: bool = False
    name: str = "robot"
    io_thread_nice: int = -10  # the I/O thread's nice value when permitted (0: leave it)

    def __post_init__(self):
        src = "bridge server config"
        if not isinstance(self.endpoint, str) or "://" not in self.endpoint:
            raise ConfigError(f"{src}: endpoint must look like tcp://HOST:PORT, got {self.endpoint!r}")
        _check_range(src, "deadman_ms", self.deadman_ms, 0.0, 10_000.0)
        _check_range(src, "lease_timeout_ms", self.lease_timeout_ms, 0.0, 600_000.0)
        if self.lease_timeout_ms < self.deadman_ms:
            raise ConfigError(
                f"{src}: lease_timeout_ms ({self.lease_timeout_ms}) must be >= deadman_ms ({self.deadman_ms})"
            )
        _check_range(src, "obs_rate_hz", self.obs_rate_hz, 0.0, 2000.0)
        _check_range(src, "max_obs_age_ms", self.max_obs_age_ms, 0.0, 600_000.0)
        _check_range(src, "max_message_bytes", self.max_message_bytes, 65_536, 2**31 - 1, lo_open=False)
        _check_range(src, "send_hwm", self.send_hwm, 1, 100_000, lo_open=False)
        _check_range(src, "peer_timeout_s", self.peer_timeout_s, 0.0, 3600.0)
        _check_range(src, "obs_history", self.obs_history, 8, 1_000_000, lo_open=False)
        _check_range(src, "io_thread_nice", self.io_thread_nice, -20, 19, lo_open=False)
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
        return _from_dict(cls, dict(raw), source)


@dataclass(frozen=True)
class ClientConfig:
    """Learner-side settings.

    ``heartbeat_ms`` must stay well below the server's deadman (default 100 ms) so a busy moment
    on the learner does not stop the arm; ``link_timeout_ms`` without a heartbeat answer marks
    the link down (calls then raise ``LinkLost``). ZeroMQ reconnects by itself with exponential
    backoff from ``reconnect_ms`` to ``reconnect_max_ms``.
    """

    endpoint: str = "tcp://127.0.0.1:5555"
    client_id: str = ""
    heartbeat_ms: float = 20.0
    link_timeout_ms: float = 500.0
    request_timeout_s: float = 5.0
    connect_timeout_s: float = 10.0
    reconnect_ms: int = 100
    reconnect_max_ms: int = 5000
    max_message_bytes: int = DEFAULT_MAX_BYTES
    curve: CurveClientKeys | None = None

    def __post_init__(self):
        src = "bridge client config"
        if not isinstance(self.endpoint, str) or "://" not in self.endpoint:
            raise ConfigError(f"{src}: endpoint must look like tcp://HOST:PORT, got {self.endpoint!r}")
        _check_range(src, "heartbeat_ms", self.heartbeat_ms, 0.0, 10_000.0)
        _check_range(src, "link_timeout_ms", self.link_timeout_ms, self.heartbeat_ms, 600_000.0)
        _check_range(src, "request_timeout_s", self.request_timeout_s, 0.0, 3600.0)
        _check_range(src, "connect_timeout_s", self.connect_timeout_s, 0.0, 3600.0)
        _check_range(src, "reconnect_ms", self.reconnect_ms, 0, 600_000)
        _check_range(src, "reconnect_max_ms", self.reconnect_max_ms, self.reconnect_ms - 1, 3_600_000)
        _check_range(src, "max_message_bytes", self.max_message_bytes, 65_536, 2**31 - 1, lo_open=False)
        if "#" in self.client_id or len(self.client_id) > 200:
            raise ConfigError(f"{src}: client_id must be at most 200 characters without '#'")
        if isinstance(self.curve, dict):
            object.__setattr__(self, "curve", CurveClientKeys(**self.curve))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "bridge client config") -> ClientConfig:
        return _from_dict(cls, dict(raw), source)
