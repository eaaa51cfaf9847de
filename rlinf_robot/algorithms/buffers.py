"""A minimal in-memory transition buffer (tensor ring) for SAC / RLPD.

It stores named tensors with a leading transition dimension and samples uniformly. Datasets on disk
(LeRobot layout) belong to ``rlinf_robot.data``; this is the learner's working memory.
"""

from __future__ import annotations

import torch
from torch import Tensor


class ReplayBuffer:
    """Fixed-capacity ring of transitions ``{key: Tensor[capacity, ...]}``, allocated on first add."""

    def __init__(self, capacity: int):
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._data: dict[str, Tensor] = {}
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, **batch: Tensor) -> None:
        """Append a batch of transitions (each value ``[n, ...]``, same n)."""
        sizes = {v.shape[0] for v in batch.values()}
        if len(sizes) != 1:
            raise ValueError(f"all fields need the same leading size, got {sizes}")
        n = sizes.pop()
        if not self._data:
            self._data = {
                k: torch.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in batch.items()
            }
        elif set(batch) != set(self._data):
            raise ValueError(f"fields {sorted(batch)} != buffer fields {sorted(self._data)}")
        idx = (self._next + torch.arange(n)) % self.capacity
        for k, v in batch.items():
            self._data[k][idx] = v.detach().to(self._data[k].dtype)
        self._next = int((self._next + n) % self.capacity)
        self._size = min(self._size + n, self.capacity)

    def latest(self, n: int) -> dict[str, Tensor]:
        """The newest ``min(n, len(self))`` transitions, oldest first."""
        n = min(int(n), self._size)
        idx = (self._next - n + torch.arange(n)) % self.capacity
        return {k: v[idx] for k, v in self._data.items()}

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> dict[str, Tensor]:
        if self._size == 0:
            raise ValueError("cannot sample from an empty buffer")
        idx = torch.randint(0, self._size, (batch_size,), generator=generator)
        return {k: v[idx] for k, v in self._data.items()}
