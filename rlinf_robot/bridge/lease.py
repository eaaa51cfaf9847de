"""The control lease: one client commands the arm, any number observe.

The holder is a client id; with CURVE it is also bound to the client's public key, so another
authorised learner cannot keep someone else's lease alive by sending heartbeats in its name. The
lease lapses when the holder goes quiet for ``timeout_ns`` (the deadman fires long before that);
after that anyone may acquire it. ``LinkWatch`` is the faster of the two clocks on the same
holder: its deadman.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlinf_robot.bridge.events import EventLog
from rlinf_robot.safety import Watchdog


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


class LinkWatch:
    """The deadman on the lease holder's link: fed by the holder's heartbeats and chunks.

    ``trip(now)`` turns the link *lost* once no feed came for ``deadman_ms`` (the server then
    holds and says ``LINK_LOST``); it stays lost until the holder (or a new holder, by acquiring)
    feeds it again, or a ``reset`` clears it.
    """

    def __init__(self, deadman_ms: float, events: EventLog):
        self.watchdog = Watchdog(deadman_ms)
        self.deadman_ns = int(deadman_ms * 1e6)
        self.events = events
        self.lost = False
        self.last_feed_ns = 0

    @property
    def trips(self) -> int:
        return self.watchdog.trips

    def feed(self, now_ns: int) -> None:
        self.watchdog.feed(now_ns / 1e9)
        self.last_feed_ns = now_ns
        if self.lost:
            self.lost = False
            self.events.add("link_restored")

    def clear(self) -> None:
        self.lost = False

    def deadline_ns(self) -> int | None:
        """When the deadman fires if nothing feeds it (None once it has)."""
        return None if self.lost else self.last_feed_ns + self.deadman_ns + 1

    def trip(self, now_ns: int) -> bool:
        """True exactly when the link turns lost now."""
        if self.lost or not self.watchdog.expired(now_ns / 1e9):
            return False
        self.lost = True
        return True
