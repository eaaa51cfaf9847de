"""The control lease: one client commands the arm, any number observe.

The holder is a client id; with CURVE it is also bound to the client's public key, so another
authorised learner cannot keep someone else's lease alive by sending heartbeats in its name. The
lease lapses when the holder goes quiet for ``timeout_ns`` (the deadman fires long before that);
after that anyone may acquire it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Lease:
    timeout_ns: int
    holder: str = ""
    key: str = ""  # z85 CURVE key of the holder ("" without CURVE)
    last_beat_ns: int = 0
    generation: int = 0  # increments on every grant, so a stale holder can be told apart

    def held_by(self, client: str, key: str = "") -> bool:
        return bool(self.holder) and self.holder == client and self.key == key

    def expired(self, now_ns: int) -> bool:
        return bool(self.holder) and now_ns - self.last_beat_ns > self.timeout_ns

    def acquire(self, client: str, key: str, now_ns: int) -> str | None:
        """Grant the lease; returns None on success, else why not."""
        if self.holder and not self.held_by(client, key) and not self.expired(now_ns):
            return f"control lease is held by {self.holder!r}"
        if not self.held_by(client, key):
            self.generation += 1
        self.holder, self.key, self.last_beat_ns = client, key, now_ns
        return None

    def beat(self, client: str, key: str, now_ns: int) -> bool:
        if self.held_by(client, key):
            self.last_beat_ns = now_ns
            return True
        return False

    def release(self) -> str:
        holder, self.holder, self.key = self.holder, "", ""
        return holder
