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

from rlinf_robot.algorithms.loops.rollout import flatten_obs, stack_obs, take_obs
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
    episode's end are masked out. Episodes that did not succeed are dropped when ``only_successful``.
    """
    obs = env.reset(seed=seed)
    obs_list, acts, dones, successes = [], [], [], []
    for _ in range(num_steps):
        a = np.asarray(expert(obs), np.float32)
        next_obs, _, term, trunc, info = env.step(a)
        obs_list.append(obs)
        acts.append(a)
        dones.append(term | trunc)
        successes.append(np.asarray(info.get("success", term), bool))
        obs = next_obs
    A = np.stack(acts)  # [T, N, A]
    D = np.stack(dones)  # [T, N]
    S = np.stack(successes)
    T, N = D.shape
    # episode id per (t, n); keep[t, n]: step belongs to a finished episode that succeeded
    ep_id = np.cumsum(np.concatenate([np.zeros((1, N), int), D[:-1].astype(int)]), axis=0)
    keep = np.zeros((T, N), bool)
    ok, total = 0, 0
    for n in range(N):
        for e in np.unique(ep_id[:, n]):
            steps = np.flatnonzero(ep_id[:, n] == e)
            finished = D[steps[-1], n]
            if not finished:
                continue
            total += 1
            good = bool(S[steps, n].any())
            ok += good
            keep[steps, n] = good or not only_successful
    H = chunk_size
    chunks = np.zeros((T, N, H, A.shape[-1]), np.float32)
    mask = np.zeros((T, N, H), bool)
    for h in range(H):
        src = np.arange(T) + h
        valid = src < T
        same = np.zeros((T, N), bool)
        same[valid] = ep_id[src[valid]] == ep_id[valid]
        chunks[valid, :, h] = A[src[valid]]
        mask[:, :, h] = same
    chunks[~mask] = 0.0  # steps past the episode's end: masked, and never another episode's actions
    flat = flatten_obs(stack_obs(obs_list))
    idx = torch.as_tensor(np.flatnonzero(keep.reshape(-1)))
    return DemoSet(
        take_obs(flat, idx),
        torch.as_tensor(chunks.reshape(T * N, H, -1))[idx],
        torch.as_tensor(mask.reshape(T * N, H))[idx],
        ok / max(total, 1),
    )


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
