"""Supervised fine-tuning / behaviour cloning from demonstrations.

Continuous action chunks (OFT-style heads) regress the expert chunk with L1 (what OpenVLA-OFT uses)
or MSE; discrete action tokens (OpenVLA-style) use cross-entropy; a Gaussian policy can maximise the
demo log-likelihood directly.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from rlinf_robot.algorithms.reduce import masked_mean
from rlinf_robot.algorithms.registry import register_loss


@register_loss("sft")
def bc_loss(pred: Tensor, target: Tensor, mask: Tensor | None = None, kind: str = "l1") -> Tensor:
    """L1: E|a_hat - a*|;  MSE: E(a_hat - a*)^2, over the ``[N, H, A]`` chunk.

    ``mask`` ``[N, H]`` drops padded steps (episodes shorter than the chunk), averaging over the rest.
    """
    if kind == "l1":
        err = (pred - target).abs()
    elif kind == "mse":
        err = (pred - target) ** 2
    else:
        raise ValueError(f"kind must be 'l1' or 'mse', got {kind!r}")
    return masked_mean(err, None if mask is None else mask.unsqueeze(-1).expand_as(err))


@register_loss("sft_nll")
def bc_nll_loss(log_prob: Tensor) -> Tensor:
    """L = -E[log pi(a* | s)]: maximum likelihood of the expert's actions."""
    return -log_prob.mean()


@register_loss("sft_tokens")
def token_ce_loss(logits: Tensor, labels: Tensor, ignore_index: int = -100) -> Tensor:
    """L = -E[log p(token*)] over positions whose label is not ``ignore_index`` (action tokens only)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=ignore_index
    )
