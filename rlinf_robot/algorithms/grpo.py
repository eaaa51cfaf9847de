"""GRPO: group-relative advantages over G rollouts of the same task, clipped ratio, KL to a reference.

No critic: rollouts started from the same seed and instruction form a group, and each rollout's
advantage is its outcome reward relative to the group (DeepSeekMath, Shao et al. 2024).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlinf_robot.algorithms.reduce import masked_mean
from rlinf_robot.algorithms.registry import register_advantage, register_loss


@register_advantage("grpo")
def group_relative_advantages(
    rewards: Tensor, eps: float = 1e-6, normalize_std: bool = True, baseline: Tensor | None = None
) -> Tensor:
    """A_{g,i} = (r_{g,i} - mean_i r_{g,i}) / (std_i r_{g,i} + eps)   for rewards shaped ``[groups, G]``.

    A group whose rollouts all scored the same gets zero advantage (nothing to learn from it).
    ``normalize_std=False`` gives the mean-centred variant (Dr. GRPO). ``baseline`` ``[groups]``
    replaces the group's mean (self-critical training: the score of the episode the policy's mean
    action played from the same start), and the spread is then taken over the G rewards and it.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [groups, G], got {tuple(rewards.shape)}")
    if baseline is None:
        centred = rewards - rewards.mean(dim=1, keepdim=True)
        every = rewards
    else:
        if baseline.shape != rewards.shape[:1]:
            raise ValueError(f"baseline must be [groups] = {rewards.shape[0]}, got {tuple(baseline.shape)}")
        centred = rewards - baseline[:, None]
        every = torch.cat([rewards, baseline[:, None]], dim=1)
    if not normalize_std:
        return centred
    return centred / (every.std(dim=1, unbiased=False, keepdim=True) + eps)


#: Log-ratios are clamped to +-this before ``exp``: e^20 ~ 5e8 lies far outside any clip range, so
#: the clipped surrogate and the KL are unchanged wherever they carry a gradient, while one sample in
#: a far tail can no longer overflow float32 (e^89) into an inf that turns the whole update NaN.
LOG_RATIO_BOUND = 20.0


def kl_k3(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """Per-sample estimate of KL(pi || pi_ref): exp(q - p) - (q - p) - 1 with p = log pi, q = log pi_ref.

    Non-negative and unbiased under samples from pi (Schulman's k3); the log-ratio is bounded by
    ``LOG_RATIO_BOUND``.
    """
    d = (ref_log_prob - log_prob).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    return d.exp() - d - 1.0


def gaussian_kl(mean: Tensor, log_std: Tensor, ref_mean: Tensor, ref_log_std: Tensor) -> Tensor:
    """KL(N(mu, sigma) || N(mu_ref, sigma_ref)) per action dimension, in closed form, flattened to
    ``[N, H * A]`` like ``dim_log_prob``.

    = log(sigma_ref / sigma) + (sigma^2 + (mu - mu_ref)^2) / (2 sigma_ref^2) - 1/2. Unlike k3 it is
    exact at the decision's observation rather than estimated from one sampled action, so its
    gradient pulls the mean back in proportion to how far it moved (with the std held: (mu -
    mu_ref) / sigma^2) instead of following one sample's exponential tail.
    """
    var_ratio = (2.0 * (log_std - ref_log_std)).exp()
    shift = (mean - ref_mean) / ref_log_std.exp()
    kl = (ref_log_std - log_std) + 0.5 * (var_ratio + shift.pow(2)) - 0.5
    return kl.flatten(1)


@register_loss("grpo")
def grpo_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    *,
    clip: float = 0.2,
    ref_log_prob: Tensor | None = None,
    kl_coef: float = 0.0,
    mask: Tensor | None = None,
    kl: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """L = -E[ min(rho A, clip(rho, 1-eps, 1+eps) A) ] + beta * E[KL(pi || pi_ref)].

    Inputs are per decision (per chunk) or per action dimension; ``mask`` selects valid ones (e.g.
    steps before the episode ended). The KL is ``kl`` where given (e.g. ``gaussian_kl``, shaped like
    ``log_prob``), else the k3 estimate from ``ref_log_prob``. Returns (loss, stats).
    """
    log_ratio = (log_prob - old_log_prob).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    ratio = log_ratio.exp()
    per = -torch.min(ratio * advantages, ratio.clamp(1.0 - clip, 1.0 + clip) * advantages)
    if kl is None:
        kl = (
            kl_k3(log_prob, ref_log_prob)
            if ref_log_prob is not None and kl_coef > 0
            else torch.zeros_like(per)
        )
    if kl_coef > 0:
        per = per + kl_coef * kl
    loss = masked_mean(per, mask)
    with torch.no_grad():
        stats = {
            "policy_loss": loss.detach(),
            "kl_ref": masked_mean(kl, mask),
            "approx_kl": masked_mean((ratio - 1.0) - log_ratio, mask),
            "clip_fraction": masked_mean(((ratio - 1.0).abs() > clip).to(per.dtype), mask),
        }
    return loss, stats
