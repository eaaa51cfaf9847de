"""The one masked mean every loss uses: padded rows (steps past an episode's end, rows that are
not demonstrations) weigh 0, and an all-zero mask gives 0 instead of a division by zero."""

from __future__ import annotations

from torch import Tensor


def masked_mean(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean of ``x`` over the rows ``mask`` weights (same shape as ``x``); all of ``x`` without one."""
    if mask is None:
        return x.mean()
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp_min(1.0)
