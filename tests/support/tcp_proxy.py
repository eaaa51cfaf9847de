"""A TCP forwarder on loopback that a test can cut and restore: the link between a learner and a
robot PC, failing the way a network does (connections reset, nothing getting through).

``cut()`` closes every forwarded connection and, until ``restore()``, accepts new ones only to
close them at once (a partition where SYNs still get answered by the kernel: what a learner sees
when a switch between it and the robot drops traffic is the same - no data, then resets).
Bounded: every thread stops when the proxy is closed.
"""

from __future__ import annotations

import selectors
import socket
import threading


class TcpProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1", record: bool = False):
        """``record``: keep every byte forwarded in ``streams``, one ``(sent, received)`` pair per
        connection (client to target, target to client): what an eavesdropper on the link captures."""
        self.target = (host, int(target_port))
        self.record = record
        self.streams: list[tuple[bytearray, bytearray]] = []
        self._listen = socket.create_server((host, 0))
        self._listen.settimeout(0.2)
        self.port = self._listen.getsockname()[1]
        self.endpoint = f"tcp://{host}:{self.port}"
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self.bytes_forwarded = 0
        self._accept_thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._accept_thread.start()

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def restore(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed.set()
        self.cut()
        self._accept_thread.join(5)
        self._listen.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listen.accept()
            except (TimeoutError, OSError):
                continue
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.streams.append((bytearray(), bytearray()))
                stream = self.streams[-1]
            threading.Thread(target=self._pump, args=(client, upstream, stream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket, stream: tuple[bytearray, bytearray]) -> None:
        sel = selectors.DefaultSelector()
        try:
            sel.register(a, selectors.EVENT_READ, b)
            sel.register(b, selectors.EVENT_READ, a)
            while not self._closed.is_set() and not self._cut.is_set():
                for key, _ in sel.select(timeout=0.2):
                    data = key.fileobj.recv(65536)
                    if not data:
                        return
                    if self.record:
                        stream[0 if key.fileobj is a else 1].extend(data)
                    key.data.sendall(data)
                    self.bytes_forwarded += len(data)
        except (OSError, ValueError):
            return
        finally:
            sel.close()
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass
