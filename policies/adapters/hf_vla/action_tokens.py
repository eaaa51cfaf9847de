"""OpenVLA's action tokenizer: uniform bins over the normalized range, mapped to the LM vocab's tail.

bin(a) = clamp(floor((a + 1) / 2 * n_bins), 0, n_bins - 1);  a_hat(b) = -1 + (b + 1/2) * 2 / n_bins
token id = start + bin, with ``start = vocab_size - n_bins`` (OpenVLA overwrites the least-used tokens).
"""

from __future__ import annotations

import torch
from torch import Tensor


class ActionTokenizer:
    def __init__(self, n_bins: int, start_id: int):
        self.n_bins, self.start = n_bins, start_id

    def to_bins(self, actions: Tensor) -> Tensor:
        return ((actions.clamp(-1.0, 1.0) + 1.0) / 2.0 * self.n_bins).floor().clamp(0, self.n_bins - 1).long()

    def centers(self, device=None) -> Tensor:
        return (
            -1.0 + (torch.arange(self.n_bins, device=device, dtype=torch.float32) + 0.5) * 2.0 / self.n_bins
        )

    def from_bins(self, bins: Tensor) -> Tensor:
        return -1.0 + (bins.float() + 0.5) * 2.0 / self.n_bins

    def to_tokens(self, bins: Tensor) -> Tensor:
        return bins.long() + self.start

    def restrict(self, logits: Tensor) -> Tensor:
        """Logits over the vocabulary -> logits over the bins (the only legal outputs)."""
        return logits[..., self.start : self.start + self.n_bins]
