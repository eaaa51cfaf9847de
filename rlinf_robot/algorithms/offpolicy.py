"""Off-policy corrections for stale rollouts (the hybrid loop: real-robot rollouts lag the learner).

Every rollout records the behaviour policy's log-probs and the policy version that produced it.
The learner then corrects with truncated importance weights instead of discarding stale data.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlinf_robot.algorithms.reduce import masked_mean
from rlinf_robot.algorithms.registry import register_loss


def truncated_importance_weights(
    log_prob: Tensor, behaviour_log_prob: Tensor, rho_max: float = 1.0
) -> Tensor:
    """w = min(pi(a|s) / mu(a|s), rho_max)  (detached): truncation bounds the variance."""
    return (log_prob - behaviour_log_prob).detach().exp().clamp(max=rho_max)


def staleness(versions: Tensor, current_version: int) -> Tensor:
    """How many learner updates old each sample is: current_version - version."""
    return current_version - versions


def fresh_mask(versions: Tensor, current_version: int, max_staleness: int) -> Tensor:
    """True for samples at most ``max_staleness`` versions old (older ones are dropped)."""
    return staleness(versions, current_version) <= max_staleness


@register_loss("decoupled_ppo")
def decoupled_ppo_loss(
    log_prob: Tensor,
    proximal_log_prob: Tensor,
    behaviour_log_prob: Tensor,
    advantages: Tensor,
    *,
    clip: float = 0.2,
    rho_max: float = 1.0,
    mask: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Decoupled PPO (Hilton et al. 2022): clip against a recent *proximal* policy, correct for the
    stale *behaviour* policy mu with a truncated importance weight:

        w   = min(pi_prox / mu, rho_max)                 (detached)
        rho = pi / pi_prox
        L   = -E[ w * min(rho A, clip(rho, 1-eps, 1+eps) A) ]

    With fresh data (mu = pi_prox) it is exactly PPO's clipped loss.
    """
    w = truncated_importance_weights(proximal_log_prob, behaviour_log_prob, rho_max)
    log_ratio = log_prob - proximal_log_prob
    ratio = log_ratio.exp()
    per = -w * torch.min(ratio * advantages, ratio.clamp(1.0 - clip, 1.0 + clip) * advantages)
    loss = masked_mean(per, mask)
    with torch.no_grad():
        stats = {
            "policy_loss": loss.detach(),
            "mean_is_weight": masked_mean(w, mask),
            "approx_kl": masked_mean((ratio - 1.0) - log_ratio, mask),
        }
    return loss, stats


def vtrace(
    behaviour_log_prob: Tensor,
    log_prob: Tensor,
    rewards: Tensor,
    values: Tensor,
    next_value: Tensor,
    dones: Tensor,
    gamma: float,
    rho_max: float = 1.0,
    c_max: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """V-trace targets (Espeholt et al. 2018) over a ``[T, N]`` rollout from a behaviour policy mu.

        rho_t = min(pi/mu, rho_max),  c_t = min(pi/mu, c_max)
        delta_t = rho_t (r_t + gamma (1-d_t) V_{t+1} - V_t)
        v_t - V_t = delta_t + gamma (1-d_t) c_t (v_{t+1} - V_{t+1})
        policy-gradient advantage: rho_t (r_t + gamma (1-d_t) v_{t+1} - V_t)

    Returns (v_s targets, pg advantages), both detached.
    """
    with torch.no_grad():
        ratio = (log_prob - behaviour_log_prob).exp()
        rho = ratio.clamp(max=rho_max)
        c = ratio.clamp(max=c_max)
        not_done = 1.0 - dones.to(rewards.dtype)
        T = rewards.shape[0]
        next_values = torch.cat([values[1:], next_value.unsqueeze(0)], dim=0)
        deltas = rho * (rewards + gamma * not_done * next_values - values)
        diff = torch.zeros_like(rewards)
        acc = torch.zeros_like(next_value, dtype=rewards.dtype)
        for t in reversed(range(T)):
            acc = deltas[t] + gamma * not_done[t] * c[t] * acc
            diff[t] = acc
        vs = values + diff
        vs_next = torch.cat([vs[1:], next_value.unsqueeze(0)], dim=0)
        pg_adv = rho * (rewards + gamma * not_done * vs_next - values)
    return vs, pg_adv
