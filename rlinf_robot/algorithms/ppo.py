"""PPO: generalized advantage estimation and the clipped surrogate, value and entropy terms.

Shapes: time-major rollouts ``[T, N]``. A policy that emits action chunks is treated as taking one
action per chunk (the chunk's log-prob is the sum over its H steps and A dims), so every function
below works unchanged at chunk level: T counts chunks, rewards are summed over the executed chunk.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlinf_robot.algorithms.reduce import masked_mean
from rlinf_robot.algorithms.registry import register_advantage, register_loss


@register_advantage("gae")
def compute_gae(
    rewards: Tensor, values: Tensor, dones: Tensor, next_value: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """GAE(gamma, lambda) over a ``[T, N]`` rollout.

        delta_t = r_t + gamma * V_{t+1} * (1 - d_t) - V_t          (V_T = next_value)
        A_t     = delta_t + gamma * lam * (1 - d_t) * A_{t+1}
        R_t     = A_t + V_t                                          (the value target)

    ``d_t`` = 1 when the episode ended at step t (the next observation belongs to a new episode).
    For a time-limit truncation add ``gamma * V(final_obs)`` to ``r_t`` before calling.
    """
    T = rewards.shape[0]
    not_done = 1.0 - dones.to(rewards.dtype)
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value, dtype=rewards.dtype)
    for t in reversed(range(T)):
        v_next = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * v_next * not_done[t] - values[t]
        last = delta + gamma * lam * not_done[t] * last
        advantages[t] = last
    return advantages, advantages + values


def normalize_advantages(adv: Tensor, eps: float = 1e-8) -> Tensor:
    """(A - mean A) / (std A + eps), over the whole minibatch."""
    return (adv - adv.mean()) / (adv.std(unbiased=False) + eps)


def chunk_log_prob(step_log_prob: Tensor, executed: Tensor | None = None) -> Tensor:
    """Chunk-level log-prob: log pi(a_{1..H}) = sum_h sum_a log pi(a_{h,a}).

    ``step_log_prob`` is ``[N, H, A]`` (per dim) or ``[N, H]``; ``executed`` ``[N, H]`` masks the steps
    that ran (an env that finished mid-chunk ignored the rest, so those actions had no effect).
    """
    per_step = step_log_prob.sum(-1) if step_log_prob.dim() == 3 else step_log_prob
    if executed is not None:
        per_step = per_step * executed.to(per_step.dtype)
    return per_step.sum(-1)


def clipped_policy_loss(log_prob: Tensor, old_log_prob: Tensor, advantages: Tensor, clip: float):
    """L^CLIP = -E[ min(rho * A, clip(rho, 1-eps, 1+eps) * A) ],  rho = exp(log pi - log pi_old).

    Returns (loss, approx_kl, clip_fraction); approx_kl = E[(rho - 1) - log rho] (the k3 estimator,
    unbiased and non-negative), used for KL early stopping.
    """
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantages, ratio.clamp(1.0 - clip, 1.0 + clip) * advantages)
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > clip).float().mean()
    return -surrogate.mean(), approx_kl, clip_fraction


def value_loss(
    value: Tensor,
    returns: Tensor,
    old_value: Tensor | None = None,
    clip: float | None = None,
    mask: Tensor | None = None,
):
    """L^V = 1/2 E[(V - R)^2]; with clipping, 1/2 E[max((V - R)^2, (V_old + clip(V - V_old, +-c) - R)^2)].
    ``mask`` weights the rows of the mean (rows with weight 0 do not count)."""
    per = (value - returns) ** 2
    if clip is not None and old_value is not None:
        clipped = (old_value + (value - old_value).clamp(-clip, clip) - returns) ** 2
        per = torch.max(per, clipped)
    return 0.5 * masked_mean(per, mask)


@register_loss("ppo")
def ppo_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    value: Tensor,
    returns: Tensor,
    entropy: Tensor,
    *,
    clip: float = 0.2,
    old_value: Tensor | None = None,
    value_clip: float | None = None,
    vf_coef: float = 0.5,
    ent_coef: float = 0.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """L = L^CLIP + c_v * L^V - c_e * E[H(pi)]. Returns (loss, stats)."""
    pg, approx_kl, clip_fraction = clipped_policy_loss(log_prob, old_log_prob, advantages, clip)
    vl = value_loss(value, returns, old_value, value_clip)
    ent = entropy.mean()
    loss = pg + vf_coef * vl - ent_coef * ent
    stats = {
        "policy_loss": pg.detach(),
        "value_loss": vl.detach(),
        "entropy": ent.detach(),
        "approx_kl": approx_kl,
        "clip_fraction": clip_fraction,
    }
    return loss, stats


def kl_early_stop(approx_kl: float | Tensor, target_kl: float | None) -> bool:
    """Stop this update's remaining epochs once KL(pi_old || pi) exceeds the target (None: never)."""
    return target_kl is not None and float(approx_kl) > target_kl
