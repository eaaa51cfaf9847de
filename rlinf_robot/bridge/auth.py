"""CURVE encryption and client authentication with ``zmq.auth``.

The robot has a key pair; each learner has its own. The robot accepts exactly the client public keys
found in one directory (``*.key`` files written by ``rlinf-robot keys generate``), re-read when the
directory changes, so revoking a learner is deleting its file. An unknown key never completes the
handshake: it gets no observation, no reply, and cannot move anything; each refusal is logged and
counted.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from rlinf_robot.bridge.config import CurveClientKeys, CurveServerKeys
from rlinf_robot.errors import ConfigError

log = logging.getLogger(__name__)


def generate_keypair(directory: str | Path, name: str) -> tuple[Path, Path]:
    """Write ``NAME.key`` (public, share it) and ``NAME.key_secret`` (keep it, mode 0600)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    public, secret = zmq.auth.create_certificates(str(directory), name)
    os.chmod(secret, 0o600)
    return Path(public), Path(secret)


def load_keypair(path: Path) -> tuple[bytes, bytes]:
    """(public, secret) from a ``.key_secret`` certificate; ConfigError naming the file otherwise."""
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read CURVE key {path}: {e}") from None
    if not secret:
        raise ConfigError(f"{path} holds no secret key (use the .key_secret file)")
    return public, secret


def load_public_key(path: Path) -> bytes:
    try:
        public, _ = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read CURVE public key {path}: {e}") from None
    return public


class AllowList:
    """ZAP credentials provider: the public keys in ``directory``, reloaded when it changes."""

    def __init__(self, directory: Path, on_refused: Callable[[str], None] | None = None):
        if not Path(directory).is_dir():
            raise ConfigError(f"authorized key directory {directory} does not exist")
        self.directory = Path(directory)
        self._on_refused = on_refused
        self._lock = threading.Lock()
        self._keys: set[bytes] = set()
        self._stamp: tuple | None = None
        self.refused = 0
        self._reload()

    def _dir_stamp(self) -> tuple:
        files = sorted(self.directory.glob("*.key"))
        return tuple((f.name, f.stat().st_mtime_ns) for f in files)

    def _reload(self) -> None:
        stamp = self._dir_stamp()
        if stamp == self._stamp:
            return
        keys = set()
        for f in sorted(self.directory.glob("*.key")):
            try:
                keys.add(load_public_key(f))
            except ConfigError as e:
                log.warning("ignoring %s", e)
        self._keys, self._stamp = keys, stamp
        log.info("CURVE allow-list: %d client key(s) from %s", len(keys), self.directory)

    def refresh(self) -> None:
        """Pick up keys added to or removed from the directory since the last look."""
        with self._lock:
            self._reload()

    def allows(self, key: str) -> bool:
        """Whether the z85 public ``key`` (a connection's ``User-Id``) is in the list as last loaded.
        CURVE checks a key only at the handshake: the server asks this of connected peers too, so a
        key removed from the directory stops a learner that is already connected."""
        return key.encode("ascii", "replace") in self._keys

    def callback(self, domain: str, key: bytes) -> bool:
        """Called by the authenticator thread with the client's z85 public key."""
        with self._lock:
            self._reload()
            ok = key in self._keys
            if not ok:
                self.refused += 1
        if not ok:
            text = key.decode("ascii", "replace")
            log.warning("refused a client with unknown CURVE key %s", text)
            if self._on_refused is not None:
                self._on_refused(text)
        return ok


class ServerSecurity:
    """Starts the ZAP authenticator and configures a server socket for CURVE."""

    def __init__(
        self, context: zmq.Context, keys: CurveServerKeys, on_refused: Callable[[str], None] | None = None
    ):
        self.public, self._secret = load_keypair(keys.secret_file)
        self.allow = AllowList(keys.authorized_dir, on_refused)
        self.auth = ThreadAuthenticator(context, log=logging.getLogger("rlinf_robot.bridge.zap"))
        self.auth.start()
        self.auth.configure_curve_callback(domain="*", credentials_provider=self.allow)

    def apply(self, sock: zmq.Socket) -> None:
        sock.curve_secretkey = self._secret
        sock.curve_publickey = self.public
        sock.curve_server = True

    def stop(self) -> None:
        self.auth.stop()


def apply_client_keys(sock: zmq.Socket, keys: CurveClientKeys) -> None:
    public, secret = load_keypair(keys.secret_file)
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_serverkey = load_public_key(keys.server_public_file)
