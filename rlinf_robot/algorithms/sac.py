"""SAC with automatic temperature (Haarnoja et al. 2018), on an ensemble of critics.

Critic outputs are stacked ``[E, B]`` (E critics). Classic SAC is E = 2 with the min; RLPD uses a
LayerNorm ensemble of E = 10 with the min over a random subset of 2 (see ``rlpd.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rlinf_robot.algorithms.registry import register_loss


def sac_q_target(
    rewards: Tensor, dones: Tensor, next_q: Tensor, next_log_prob: Tensor, alpha: float | Tensor, gamma: float
) -> Tensor:
    """y = r + gamma * (1 - d) * ( min_e Q'_e(s', a') - alpha * log pi(a'|s') ),  a' ~ pi(.|s').

    ``next_q`` is ``[E, B]`` from the target critics (pass the subset to take the min over);
    ``dones`` are true terminations only (a time-limit truncation still bootstraps).
    """
    soft_value = next_q.min(dim=0).values - alpha * next_log_prob
    return (rewards + gamma * (1.0 - dones.to(rewards.dtype)) * soft_value).detach()


@register_loss("sac_critic")
def sac_critic_loss(q: Tensor, target: Tensor) -> Tensor:
    """L_Q = sum_e 1/2 E[(Q_e(s, a) - y)^2]  over the ``[E, B]`` ensemble."""
    return 0.5 * ((q - target.unsqueeze(0)) ** 2).mean(dim=1).sum()


@register_loss("sac_actor")
def sac_actor_loss(q_pi: Tensor, log_prob: Tensor, alpha: float | Tensor, reduce: str = "min") -> Tensor:
    """L_pi = E[ alpha * log pi(a|s) - Q(s, a) ],  a ~ pi (reparameterized).

    Q is the min over the ensemble (SAC) or the mean (RLPD / REDQ): ``reduce`` in {"min", "mean"}.
    """
    if reduce == "min":
        q = q_pi.min(dim=0).values
    elif reduce == "mean":
        q = q_pi.mean(dim=0)
    else:
        raise ValueError(f"reduce must be 'min' or 'mean', got {reduce!r}")
    return (alpha * log_prob - q).mean()


@register_loss("sac_temperature")
def temperature_loss(log_alpha: Tensor, log_prob: Tensor, target_entropy: float) -> Tensor:
    """L_alpha = -E[ log_alpha * (log pi(a|s) + H_target) ]   (a, log pi detached).

    Its gradient raises alpha when the policy's entropy -E[log pi] falls below H_target (usually
    -dim(A)) and lowers it otherwise.
    """
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging: theta' <- tau * theta + (1 - tau) * theta'."""
    torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), tau)
