"""Behaviour cloning: record a scripted expert's episodes as action chunks, regress them.

A demo sample is (observation at t, the expert's next H actions, mask of the ones inside the
episode). The policy's ``forward`` gives its chunk ``mean`` in normalized space; the loss is
``algorithms.sft.bc_loss`` (L1 by default, as OpenVLA-OFT).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlinf_robot.algorithms.loops.rollout import take_obs
from rlinf_robot.algorithms.sft import bc_loss, bc_nll_loss
from rlinf_robot.envs.spec import BatchedEnv


@dataclass
class DemoSet:
    obs: dict  # flat [B, ...]
    actions: torch.Tensor  # [B, H, A] env units
    mask: torch.Tensor  # [B, H]
    success_rate: float

    def __len__(self) -> int:
        return self.actions.shape[0]


def collect_demos(
    env: BatchedEnv,
    expert: Callable[[dict], np.ndarray],
    num_steps: int,
    chunk_size: int,
    seed: int = 0,
    only_successful: bool = True,
) -> DemoSet:
    """Run ``expert(obs) -> actions[N, A]`` for ``num_steps`` steps in every env and cut chunks.

    The chunk at step t holds the expert's actions t..t+H-1 of the same episode; steps past the
    episode's end are masked out. Only finished episodes are kept, and of those only the ones that
    ended in success when ``only_successful``. (``demos.record_expert`` records with DART noise and
    gives RLPD transitions as well.)
    """
    from rlinf_robot.algorithms.loops.demos import record_expert

    rollouts = record_expert(env, expert, num_steps=num_steps, seed=seed, only_successful=only_successful)
    return rollouts.demo_set(chunk_size)


@dataclass
class SFTConfig:
    epochs: int = 20
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 0.0
    loss: str = "l1"  # "l1" | "mse" on the chunk mean, or "nll" (log-likelihood, e.g. action tokens)
    max_grad_norm: float = 1.0


def train_sft(
    policy, demos: DemoSet, cfg: SFTConfig, seed: int = 0, log: Callable[[dict], None] | None = None
):
    """Minibatch behaviour cloning; returns the per-epoch mean loss."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    if hasattr(policy, "update_obs_norm"):  # state statistics come from the demonstrations
        policy.update_obs_norm(demos.obs["state"])
    target = policy.normalize_actions(demos.actions)
    losses = []
    for epoch in range(cfg.epochs):
        perm = torch.randperm(len(demos), generator=gen)
        total, count = 0.0, 0
        for start in range(0, len(demos), cfg.batch_size):
            idx = perm[start : start + cfg.batch_size]
            if cfg.loss == "nll":  # likelihood of the expert chunk (token heads: cross-entropy)
                raw = policy.raw_from_normalized(target[idx])
                loss = bc_nll_loss(policy({"obs": take_obs(demos.obs, idx), "raw_actions": raw})["log_prob"])
            else:
                out = policy({"obs": take_obs(demos.obs, idx)})
                loss = bc_loss(out["mean"], target[idx], demos.mask[idx], cfg.loss)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            opt.step()
            total += loss.item() * len(idx)
            count += len(idx)
        losses.append(total / count)
        if log:
            log({"epoch": epoch, "sft_loss": losses[-1]})
    return losses
