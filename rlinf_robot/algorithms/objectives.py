"""Objectives: a policy's forward pass on a (micro-)batch plus one of the losses, by name.

A learner that only knows ``objective(policy, batch) -> (loss, stats)`` can train any algorithm;
batch keys are the rollout's (``obs``, ``raw_actions``, ``log_prob``, ``advantages``, ...). Advantages
arrive already normalized over the whole global batch, so splitting a batch across ranks or
micro-batches never changes the result.
"""

from __future__ import annotations

from torch import Tensor

from rlinf_robot.algorithms.grpo import grpo_loss
from rlinf_robot.algorithms.offpolicy import decoupled_ppo_loss
from rlinf_robot.algorithms.ppo import ppo_loss, value_loss
from rlinf_robot.algorithms.reduce import masked_mean
from rlinf_robot.algorithms.registry import register_objective
from rlinf_robot.algorithms.sft import bc_loss, bc_nll_loss


@register_objective("ppo")
def ppo_objective(
    policy,
    batch: dict,
    clip: float = 0.2,
    vf_coef: float = 0.5,
    ent_coef: float = 0.0,
    value_clip: float | None = None,
) -> tuple[Tensor, dict]:
    out = policy({"obs": batch["obs"], "raw_actions": batch["raw_actions"]})
    return ppo_loss(
        out["log_prob"],
        batch["log_prob"],
        batch["advantages"],
        out["value"],
        batch["returns"],
        out["entropy"],
        clip=clip,
        old_value=batch.get("value"),
        value_clip=value_clip,
        vf_coef=vf_coef,
        ent_coef=ent_coef,
    )


@register_objective("grpo")
def grpo_objective(policy, batch: dict, clip: float = 0.2, kl_coef: float = 0.0) -> tuple[Tensor, dict]:
    out = policy({"obs": batch["obs"], "raw_actions": batch["raw_actions"]})
    return grpo_loss(
        out["log_prob"],
        batch["log_prob"],
        batch["advantages"],
        clip=clip,
        ref_log_prob=batch.get("ref_log_prob"),
        kl_coef=kl_coef,
        mask=batch.get("mask"),
    )


@register_objective("decoupled_ppo")
def decoupled_ppo_objective(
    policy,
    batch: dict,
    clip: float = 0.2,
    rho_max: float = 1.0,
    vf_coef: float = 0.0,
    ent_coef: float = 0.0,
    value_clip: float | None = None,
    bc_coef: float = 0.0,
) -> tuple[Tensor, dict]:
    """Stale rollouts: ``behaviour_log_prob`` from the (older) policy version that acted,
    ``proximal_log_prob`` from the learner's weights when the batch arrived. With ``vf_coef`` > 0
    the batch's ``returns`` also train the value head (clipped around ``value`` with
    ``value_clip``), and ``ent_coef`` adds the entropy bonus: the whole PPO actor-critic loss, with
    fresh rows (behaviour = proximal) getting exactly PPO's. ``mask`` weights rows in every term;
    ``noise_scale`` [B] scores each row under the policy its actor explored with (std times the
    scale: a robot exploring with a fraction of the noise), as its two stored log-probs are. With
    ``bc_coef``, rows where ``bc_mask`` is 1 are demonstrations cloned towards ``bc_target`` (give
    them ``mask`` 0: they are not RL rows)."""
    out = policy(
        {"obs": batch["obs"], "raw_actions": batch["raw_actions"], "noise_scale": batch.get("noise_scale")}
    )
    mask = batch.get("mask")
    loss, stats = decoupled_ppo_loss(
        out["log_prob"],
        batch["proximal_log_prob"],
        batch["behaviour_log_prob"],
        batch["advantages"],
        clip=clip,
        rho_max=rho_max,
        mask=mask,
    )
    if vf_coef:
        vl = value_loss(out["value"], batch["returns"], batch.get("value"), value_clip, mask=mask)
        loss = loss + vf_coef * vl
        stats["value_loss"] = vl.detach()
    ent = masked_mean(out["entropy"], mask)
    if ent_coef:
        loss = loss - ent_coef * ent
    stats["entropy"] = ent.detach()
    if bc_coef and batch.get("bc_mask") is not None:
        # RLinf-Co's auxiliary loss: rows with ``bc_mask`` are demonstrations (``bc_target``, env
        # units), cloned by the policy's mean (L1 in the normalized space) beside the RL rows
        per = (out["mean"] - policy.normalize_actions(batch["bc_target"])).abs().flatten(1).mean(-1)
        bc = masked_mean(per, batch["bc_mask"])
        loss = loss + bc_coef * bc
        stats["bc_loss"] = bc.detach()
    return loss, stats


@register_objective("sft")
def sft_objective(policy, batch: dict, kind: str = "l1") -> tuple[Tensor, dict]:
    """Behaviour cloning on expert chunks in env units (``actions`` [B, H, A], optional ``mask``)."""
    target = policy.normalize_actions(batch["actions"])
    if kind == "nll":
        loss = bc_nll_loss(
            policy({"obs": batch["obs"], "raw_actions": policy.raw_from_normalized(target)})["log_prob"]
        )
    else:
        loss = bc_loss(policy({"obs": batch["obs"]})["mean"], target, batch.get("mask"), kind)
    return loss, {"sft_loss": loss.detach()}
