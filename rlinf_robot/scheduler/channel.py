"""``Channel``: bounded async queues between worker groups, backed by one Ray actor.

- Named sub-queues (``key``): one channel carries e.g. ``"sim"`` and ``"real"`` trajectories.
- Per-item ``weight`` (e.g. a batch size): capacity is counted in weight, and ``get_batch`` hands a
  consumer items until their weights reach what it asked for, which balances uneven batches over
  several consumers.
- Back-pressure: ``put`` waits while the sub-queue is full; ``put`` and ``get`` take timeouts and
  raise ``ChannelTimeout``; a dead channel raises ``ChannelClosed``.
- Items must be plain data (numbers, strings, bytes, numpy arrays, tensors, and lists / tuples /
  dicts of them): arbitrary objects are refused before they leave the process. Items above
  ``by_ref_bytes`` go through the Ray object store (the channel actor then holds only a reference,
  so large arrays are not copied through it).

The channel actor is asynchronous: thousands of waiting puts/gets cost no threads.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from rlinf_robot.scheduler.errors import ChannelClosed, ChannelTimeout

DEFAULT_TIMEOUT_S = 60.0
_PLAIN_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def check_plain(item: Any, _depth: int = 0) -> int:
    """Raise ``TypeError`` unless ``item`` is plain data; returns its approximate payload bytes.

    >>> check_plain({"obs": [1.0, 2.0], "ok": True})
    0
    >>> check_plain(object())
    Traceback (most recent call last):
    ...
    TypeError: channel items must be plain data (numbers, str, bytes, arrays, tensors, list/tuple/dict), got object
    """
    if _depth > 32:
        raise TypeError("channel item nested deeper than 32 levels")
    if isinstance(item, _PLAIN_SCALARS):
        return len(item) if isinstance(item, bytes) else 0
    tname = type(item).__module__.split(".")[0]
    if tname == "numpy":
        import numpy as np

        if isinstance(item, np.ndarray):
            if item.dtype.hasobject:
                raise TypeError("channel items cannot hold numpy object arrays")
            return int(item.nbytes)
        if isinstance(item, np.generic):
            return 0
    if tname == "torch" and type(item).__name__ in ("Tensor", "Parameter"):
        return int(item.numel() * item.element_size())
    if isinstance(item, (list, tuple)):
        return sum(check_plain(x, _depth + 1) for x in item)
    if isinstance(item, dict):
        return sum(check_plain(k, _depth + 1) + check_plain(v, _depth + 1) for k, v in item.items())
    raise TypeError(
        "channel items must be plain data (numbers, str, bytes, arrays, tensors, list/tuple/dict), "
        f"got {type(item).__name__}"
    )


@dataclass(frozen=True)
class _ByRef:
    """An item parked in the object store; the channel actor only sees this reference."""

    ref: list  # [ObjectRef]: in a list so Ray passes the reference through instead of resolving it


class _SubQueue:
    def __init__(self, capacity: float):
        self.capacity = capacity
        self.items: deque[tuple[Any, float]] = deque()
        self.weight = 0.0
        self.cond = asyncio.Condition()


class ChannelActor:
    """The queue state (runs as an async Ray actor; use ``Channel`` rather than this directly)."""

    def __init__(self, capacity: float):
        self.capacity = float(capacity)
        self.queues: dict[str, _SubQueue] = {}
        self.closed = False

    def _q(self, key: str) -> _SubQueue:
        if key not in self.queues:
            self.queues[key] = _SubQueue(self.capacity)
        return self.queues[key]

    async def put(self, key: str, item: Any, weight: float, timeout: float | None) -> None:
        q = self._q(key)
        if weight > q.capacity:
            raise ValueError(f"item weight {weight} exceeds channel capacity {q.capacity}")
        async with q.cond:
            try:
                await asyncio.wait_for(
                    q.cond.wait_for(lambda: self.closed or q.weight + weight <= q.capacity), timeout
                )
            except asyncio.TimeoutError:
                raise ChannelTimeout(
                    f"put on {key!r}: queue full ({q.weight:g}/{q.capacity:g}) for {timeout}s"
                ) from None
            if self.closed:
                raise ChannelClosed("channel closed")
            q.items.append((item, weight))
            q.weight += weight
            q.cond.notify_all()

    async def get_batch(self, key: str, min_weight: float, timeout: float | None) -> list[tuple[Any, float]]:
        q = self._q(key)
        async with q.cond:
            try:
                await asyncio.wait_for(
                    q.cond.wait_for(
                        lambda: self.closed or (q.items and q.weight >= min(min_weight, q.capacity))
                    ),
                    timeout,
                )
            except asyncio.TimeoutError:
                raise ChannelTimeout(
                    f"get on {key!r}: {q.weight:g} of {min_weight:g} weight arrived in {timeout}s"
                ) from None
            if self.closed and not q.items:
                raise ChannelClosed("channel closed")
            out, got = [], 0.0
            while q.items and (not out or got < min_weight):
                item, w = q.items.popleft()
                out.append((item, w))
                got += w
            q.weight -= got
            q.cond.notify_all()
            return out

    async def stats(self) -> dict[str, dict[str, float]]:
        return {k: {"items": len(q.items), "weight": q.weight} for k, q in self.queues.items()}

    async def close(self) -> None:
        self.closed = True
        for q in self.queues.values():
            async with q.cond:
                q.cond.notify_all()


class Channel:
    """Client side; picklable by Ray, so it can be handed to workers as an argument."""

    def __init__(self, name: str, handle: Any, by_ref_bytes: int):
        self.name, self._handle, self.by_ref_bytes = name, handle, by_ref_bytes

    @classmethod
    def create(cls, name: str, capacity: float = 64, by_ref_bytes: int = 1 << 20) -> Channel:
        """Start the channel actor (named ``channel/<name>`` in the cluster's namespace)."""
        import ray

        if capacity <= 0:
            raise ValueError(f"channel capacity must be > 0, got {capacity}")
        actor = ray.remote(ChannelActor).options(
            name=f"channel/{name}", num_cpus=0, max_concurrency=1000, max_restarts=0
        )
        return cls(name, actor.remote(capacity), by_ref_bytes)

    @classmethod
    def connect(cls, name: str, by_ref_bytes: int = 1 << 20) -> Channel:
        import ray

        try:
            return cls(name, ray.get_actor(f"channel/{name}"), by_ref_bytes)
        except ValueError as exc:
            raise ChannelClosed(f"no channel named {name!r}") from exc

    # ---------------------------------------------------------------- puts
    def put_async(
        self, item: Any, key: str = "default", weight: float = 1.0, timeout: float | None = DEFAULT_TIMEOUT_S
    ) -> Any:
        """Enqueue without waiting; returns a Ray ObjectRef that resolves once the item is queued."""
        import ray

        nbytes = check_plain(item)
        if weight <= 0:
            raise ValueError(f"item weight must be > 0, got {weight}")
        if nbytes > self.by_ref_bytes:
            item = _ByRef([ray.put(item)])
        return self._handle.put.remote(key, item, float(weight), timeout)

    def put(
        self, item: Any, key: str = "default", weight: float = 1.0, timeout: float | None = DEFAULT_TIMEOUT_S
    ) -> None:
        self._wait(self.put_async(item, key, weight, timeout), timeout)

    # ---------------------------------------------------------------- gets
    def get(self, key: str = "default", timeout: float | None = DEFAULT_TIMEOUT_S) -> Any:
        (item,) = self.get_batch(0.0, key, timeout)
        return item

    def get_with_weight(
        self, key: str = "default", timeout: float | None = DEFAULT_TIMEOUT_S
    ) -> tuple[Any, float]:
        ((item, weight),) = self._get(0.0, key, timeout)
        return item, weight

    def get_batch(
        self, min_weight: float, key: str = "default", timeout: float | None = DEFAULT_TIMEOUT_S
    ) -> list[Any]:
        """Items (FIFO) until their summed weight reaches ``min_weight`` (at least one item)."""
        return [item for item, _ in self._get(min_weight, key, timeout)]

    def _get(self, min_weight: float, key: str, timeout: float | None) -> list[tuple[Any, float]]:
        import ray

        out = self._wait(self._handle.get_batch.remote(key, float(min_weight), timeout), timeout)
        return [(ray.get(i.ref[0]) if isinstance(i, _ByRef) else i, w) for i, w in out]

    # ---------------------------------------------------------------- misc
    def stats(self) -> dict[str, dict[str, float]]:
        return self._wait(self._handle.stats.remote(), DEFAULT_TIMEOUT_S)

    def qsize(self, key: str = "default") -> int:
        return int(self.stats().get(key, {}).get("items", 0))

    def close(self) -> None:
        """Wake every waiter with ``ChannelClosed`` and stop the channel actor."""
        import ray

        try:
            self._wait(self._handle.close.remote(), 10.0)
        except ChannelClosed:
            pass
        ray.kill(self._handle, no_restart=True)

    def _wait(self, ref: Any, timeout: float | None) -> Any:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        try:
            # The actor enforces the timeout; the margin only guards against a wedged actor.
            return ray.get(ref, timeout=None if timeout is None else timeout + 10.0)
        except RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, (ChannelTimeout, ChannelClosed, ValueError)):
                raise type(cause)(str(cause)) from None
            raise
        except RayActorError as exc:
            raise ChannelClosed(f"channel {self.name!r} is gone: {str(exc).splitlines()[0]}") from None
        except GetTimeoutError as exc:
            raise ChannelTimeout(f"channel {self.name!r} did not answer") from exc
