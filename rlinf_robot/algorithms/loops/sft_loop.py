"""Behaviour cloning: record a scripted expert's episodes as action chunks, regress them.

A demo sample is (observation at t, the expert's next H actions, mask of the ones inside the
episode). The policy's ``forward`` gives its chunk ``mean`` in normalized space; the loss is
``algorithms.sft.bc_loss`` (L1 by default, as OpenVLA-OFT).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlinf_robot.algorithms.loops.rollout import take_obs
from rlinf_robot.algorithms.sft import bc_loss, bc_nll_loss
from rlinf_robot.envs.spec import BatchedEnv
from rlinf_robot.errors import ConfigError


@dataclass
class DemoSet:
    obs: dict  # flat [B, ...]
    actions: torch.Tensor  # [B, H, A] env units
    mask: torch.Tensor  # [B, H]
    success_rate: float
    aux: torch.Tensor | None = None  # [B, P] privileged auxiliary targets (NaN: none for that sample)

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
    #: weight of the auxiliary loss: the policy's ``aux`` output regressed onto ``DemoSet.aux``
    #: (standardized per column); 0: off
    aux_coef: float = 0.0
    #: random shift of every camera image by up to this many pixels per sample (edge pixels
    #: repeated, as DrQ and robomimic's crop randomizer): a few thousand demo frames are too few for
    #: an image encoder not to memorize where things sit to the pixel; 0: off
    image_shift: int = 0
    #: "constant", or "cosine": the learning rate falls from ``lr`` to 0 along a half cosine over
    #: the run's steps, so the last epochs settle the clone instead of following each minibatch's
    #: noise (vla_pixels: docs/learning.md)
    lr_schedule: str = "constant"

    def __post_init__(self):
        if not (isinstance(self.image_shift, int) and self.image_shift >= 0):
            raise ConfigError(f"sft.image_shift must be an int >= 0, got {self.image_shift!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(
                f"sft.lr_schedule must be one of {sorted(LR_SCHEDULES)}, got {self.lr_schedule!r}"
            )


#: learning-rate factor at ``progress`` (0 at the first step, 1 after the last)
LR_SCHEDULES: dict[str, Callable[[float], float]] = {
    "constant": lambda progress: 1.0,
    "cosine": lambda progress: 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))),
}


def train_sft(
    policy, demos: DemoSet, cfg: SFTConfig, seed: int = 0, log: Callable[[dict], None] | None = None
):
    """Minibatch behaviour cloning; returns the per-epoch mean loss."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    if hasattr(policy, "update_obs_norm"):  # state statistics come from the demonstrations
        policy.update_obs_norm(demos.obs["state"])
    target = policy.normalize_actions(demos.actions)
    aux = _standardized(demos.aux) if cfg.aux_coef > 0 and demos.aux is not None else None
    factor = LR_SCHEDULES[cfg.lr_schedule]
    per_epoch = -(-len(demos) // cfg.batch_size)
    total_steps, step = max(1, cfg.epochs * per_epoch), 0
    losses = []
    for epoch in range(cfg.epochs):
        t0 = time.perf_counter()
        perm = torch.randperm(len(demos), generator=gen)
        total, aux_total, count = 0.0, 0.0, 0
        for start in range(0, len(demos), cfg.batch_size):
            idx = perm[start : start + cfg.batch_size]
            obs = take_obs(demos.obs, idx)
            if cfg.image_shift:
                obs["images"] = {c: random_shift(v, cfg.image_shift, gen) for c, v in obs["images"].items()}
            if cfg.loss == "nll":  # likelihood of the expert chunk (token heads: cross-entropy)
                raw = policy.raw_from_normalized(target[idx])
                loss = bc_nll_loss(policy({"obs": obs, "raw_actions": raw})["log_prob"])
            else:
                out = policy({"obs": obs})
                loss = bc_loss(out["mean"], target[idx], demos.mask[idx], cfg.loss)
            total += loss.item() * len(idx)
            if aux is not None:
                aux_loss = _aux_loss(out, aux[idx])
                aux_total += aux_loss.item() * len(idx)
                loss = loss + cfg.aux_coef * aux_loss
            for group in opt.param_groups:
                group["lr"] = cfg.lr * factor(step / total_steps)
            step += 1
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            opt.step()
            count += len(idx)
        losses.append(total / count)  # the behaviour-cloning loss (the auxiliary one is logged apart)
        if log:
            log(
                {
                    "epoch": epoch,
                    "sft_loss": losses[-1],
                    **({"aux_loss": aux_total / count} if aux is not None else {}),
                    "samples_per_s": count / (time.perf_counter() - t0),
                    "lr": opt.param_groups[0]["lr"],  # at the epoch's last step
                }
            )
    return losses


def random_shift(images: torch.Tensor, pad: int, gen: torch.Generator) -> torch.Tensor:
    """``[B, H, W, C]`` images, each moved by its own integer offset in ``[-pad, pad]`` along both
    axes; the pixels that come in repeat the edge. Same dtype (uint8 stays uint8)."""
    images = torch.as_tensor(images)
    b, h, w = images.shape[:3]
    dy = torch.randint(0, 2 * pad + 1, (b, 1), generator=gen)
    dx = torch.randint(0, 2 * pad + 1, (b, 1), generator=gen)
    rows = (torch.arange(h) + dy - pad).clamp(0, h - 1)  # [B, H]
    cols = (torch.arange(w) + dx - pad).clamp(0, w - 1)  # [B, W]
    return images[torch.arange(b)[:, None, None], rows[:, :, None], cols[:, None, :]]


def _standardized(aux: torch.Tensor) -> torch.Tensor:
    """Each column to zero mean and unit std over the samples that have it (NaN stays NaN)."""
    have = ~torch.isnan(aux)
    n = have.sum(0).clamp(min=1)
    filled = torch.where(have, aux, torch.zeros_like(aux))
    mean = filled.sum(0) / n
    std = (torch.where(have, aux - mean, torch.zeros_like(aux)).square().sum(0) / n).sqrt().clamp(min=1e-6)
    return (aux - mean) / std


def _aux_loss(out: dict, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the policy's ``aux`` output over the targets that exist."""
    if "aux" not in out:
        raise ValueError("aux_coef > 0 needs a policy with an auxiliary head (tiny_vla: aux_dim)")
    have = ~torch.isnan(target)
    err = torch.where(have, out["aux"] - torch.nan_to_num(target), torch.zeros_like(target))
    return err.square().sum() / have.sum().clamp(min=1)
