"""A minimal policy server speaking openpi's websocket protocol, for tests and local serving.

The protocol (openpi ``WebsocketPolicyServer``): on connect the server sends its metadata (a
msgpack map); then each binary message from the client is a msgpack-numpy observation and the
reply is a msgpack-numpy map with ``"actions"`` [H, A] (plus timing); on failure the server sends
the error as a text frame. msgpack-numpy never unpickles: arrays travel as dtype/shape/bytes.
Listens on 127.0.0.1 by default and stops itself after ``lifetime_s`` even if nobody closes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rlinf_robot.errors import MissingDependency


class OpenPIPolicyServer:
    """``with OpenPIPolicyServer(fn) as srv: WebsocketClientPolicy("127.0.0.1", srv.port)``."""

    def __init__(
        self,
        infer: Callable[[dict], dict],
        host: str = "127.0.0.1",
        port: int = 0,
        metadata: dict | None = None,
        lifetime_s: float = 300.0,
    ):
        try:
            import websockets.sync.server as ws_server
            from openpi_client import msgpack_numpy
        except ImportError as e:  # pragma: no cover - depends on the install
            raise MissingDependency("openpi-client", hint=_INSTALL_HINT) from e
        self._infer, self._metadata = infer, metadata or {}
        self._pack, self._unpack = msgpack_numpy.packb, msgpack_numpy.unpackb
        self._server = ws_server.serve(self._handle, host, port, compression=None, max_size=None)
        self.host, self.port = host, self._server.socket.getsockname()[1]
        self.requests = 0
        self._thread = threading.Thread(target=self._server.serve_forever, name="openpi-server", daemon=True)
        self._timer = threading.Timer(lifetime_s, self.close)
        self._timer.daemon = True

    def _handle(self, conn) -> None:
        conn.send(self._pack(self._metadata))
        for message in conn:  # ends when the client disconnects or the server shuts down
            t0 = time.perf_counter()
            try:
                if isinstance(message, str):
                    raise ValueError("expected a binary msgpack observation")
                out = dict(self._infer(self._unpack(message)))
                out["server_timing"] = {"infer_ms": 1000.0 * (time.perf_counter() - t0)}
                conn.send(self._pack(out))
            except Exception as e:  # reported to the client as openpi does: a text frame
                conn.send(f"{type(e).__name__}: {e}")
            self.requests += 1

    def __enter__(self) -> OpenPIPolicyServer:
        self._thread.start()
        self._timer.start()
        return self

    def close(self) -> None:
        self._timer.cancel()
        self._server.shutdown()

    def __exit__(self, *exc) -> None:
        self.close()
        self._thread.join(timeout=5.0)


_INSTALL_HINT = "pip install --no-deps openpi-client && pip install dm-tree msgpack pillow websockets"
