"""RLPD (Ball et al. 2023): SAC made sample-efficient with prior data.

Three ingredients, each small: symmetric sampling (half of every batch from the demonstration
buffer, half from online experience), a LayerNorm critic ensemble (``policies.mlp.QEnsemble``), and a
target that takes the min over a random subset of the ensemble. A high update-to-data ratio is a
loop setting, not math.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlinf_robot.algorithms.buffers import ReplayBuffer


def symmetric_sample(
    demo: ReplayBuffer, online: ReplayBuffer, batch_size: int, generator: torch.Generator | None = None
) -> dict[str, Tensor]:
    """A batch with ``batch_size // 2`` transitions from ``demo`` and the rest from ``online``.

    Until the online buffer holds data the whole batch comes from the demos.
    """
    if len(online) == 0:
        return demo.sample(batch_size, generator)
    n_demo = batch_size // 2
    a = demo.sample(n_demo, generator)
    b = online.sample(batch_size - n_demo, generator)
    return {k: torch.cat([a[k], b[k]], dim=0) for k in a}


def share_sample(
    main: ReplayBuffer,
    other: ReplayBuffer,
    batch_size: int,
    share: float,
    generator: torch.Generator | None = None,
) -> tuple[dict[str, Tensor], int]:
    """A batch with ``round(share * batch_size)`` transitions from ``other`` and the rest from
    ``main`` (``symmetric_sample`` is share 0.5 with the demos as ``main``); all from ``main``
    while ``other`` is empty. Returns the batch and how many of its rows came from ``other``."""
    n_other = int(round(share * batch_size)) if len(other) else 0
    n_other = min(n_other, batch_size) if len(main) else batch_size
    parts = [b.sample(n, generator) for b, n in ((main, batch_size - n_other), (other, n_other)) if n]
    return {k: torch.cat([p[k] for p in parts], dim=0) for k in parts[0]}, n_other


def subset_min(q: Tensor, num_min: int, generator: torch.Generator | None = None) -> Tensor:
    """min over a random subset of ``num_min`` of the E critics in ``q[E, B]`` -> ``[1, B]``.

    With E = 10 and num_min = 2 this curbs the over-estimation a large ensemble's mean would have
    while staying less pessimistic than the min over all ten.
    """
    E = q.shape[0]
    if not 1 <= num_min <= E:
        raise ValueError(f"num_min must be in [1, {E}], got {num_min}")
    idx = torch.randperm(E, generator=generator, device="cpu")[:num_min].to(q.device)
    return q.index_select(0, idx).min(dim=0, keepdim=True).values
