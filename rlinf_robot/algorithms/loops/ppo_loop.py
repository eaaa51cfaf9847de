"""On-policy PPO: collect chunk-level rollouts from a batched env, GAE, clipped updates.

Reads top to bottom like CleanRL's ppo_continuous_action, with the env already batched and the
policy emitting action chunks (one decision per chunk; see ``algorithms.ppo``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rlinf_robot.algorithms.loops.rollout import (
    EpisodeTracker,
    env_step,
    episode_success,
    final_obs,
    flatten_obs,
    stack_obs,
    take_obs,
)
from rlinf_robot.algorithms.ppo import compute_gae, kl_early_stop, normalize_advantages, ppo_loss
from rlinf_robot.envs.spec import BatchedEnv
from rlinf_robot.errors import ConfigError


@dataclass
class PPOConfig:
    num_steps: int = 32  # decisions (chunks) per env per rollout
    epochs: int = 10
    minibatch_size: int = 256
    lr: float = 3e-4
    gamma: float = 0.99
    lam: float = 0.95
    clip: float = 0.2
    value_clip: float | None = None
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 0.5
    target_kl: float | None = 0.02
    norm_adv: bool = True
    anneal_lr: bool = False
    update_obs_norm: bool = True  # False when fine-tuning a policy whose normalizer came with it

    def __post_init__(self):
        for key in ("num_steps", "epochs", "minibatch_size"):
            if getattr(self, key) < 1:
                raise ConfigError(f"ppo.{key} must be >= 1, got {getattr(self, key)}")
        if not 0 < self.gamma <= 1 or not 0 <= self.lam <= 1:
            raise ConfigError("ppo.gamma must be in (0, 1] and ppo.lam in [0, 1]")


@dataclass
class Rollout:
    obs: dict  # [T, N, ...]
    raw_actions: Tensor  # [T, N, H, A]
    log_prob: Tensor  # [T, N]
    value: Tensor  # [T, N]
    rewards: Tensor  # [T, N]
    dones: Tensor  # [T, N]
    next_value: Tensor  # [N]


def collect_rollout(
    env: BatchedEnv, policy, obs: dict, num_steps: int, tracker: EpisodeTracker, gamma: float
):
    """Run ``num_steps`` decisions in ``env``. Returns (rollout, next obs).

    A time-limit truncation is bootstrapped, r_t += gamma * V(final obs), when the env reports the
    pre-reset observation (see ``final_obs``); otherwise the truncation counts as an end.
    """
    obs_list, raws, logps, values, rewards, dones = [], [], [], [], [], []
    for _ in range(num_steps):
        out = policy.predict_action_batch(obs)
        next_obs, reward, term, trunc, info = env_step(env, out.actions)
        reward = np.asarray(reward, np.float32).copy()
        final = final_obs(info, next_obs, policy)
        if final is not None and trunc.any():
            with torch.no_grad():
                v_final = policy.value(final).cpu().numpy()
            reward += np.where(trunc & ~term, gamma * v_final, 0.0).astype(np.float32)
        done = term | trunc
        tracker.update(reward, done, episode_success(info, term, trunc), steps=out.actions.shape[1])
        obs_list.append(obs)
        raws.append(out.raw_actions)
        logps.append(out.log_prob)
        values.append(out.value)
        rewards.append(torch.as_tensor(reward))
        dones.append(torch.as_tensor(done, dtype=torch.float32))
        obs = next_obs
    with torch.no_grad():
        next_value = policy.value(obs)
    rollout = Rollout(
        stack_obs(obs_list),
        torch.stack(raws),
        torch.stack(logps),
        torch.stack(values),
        torch.stack(rewards),
        torch.stack(dones),
        next_value,
    )
    return rollout, obs


def ppo_update(
    policy,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    cfg: PPOConfig,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """``cfg.epochs`` passes of clipped-PPO minibatch SGD; stops early when KL passes ``target_kl``."""
    adv, returns = compute_gae(
        rollout.rewards, rollout.value, rollout.dones, rollout.next_value, cfg.gamma, cfg.lam
    )
    obs = flatten_obs(rollout.obs)
    raw = rollout.raw_actions.flatten(0, 1)
    old_logp, old_v = rollout.log_prob.flatten(), rollout.value.flatten()
    adv, returns = adv.flatten(), returns.flatten()
    B = raw.shape[0]
    mb = min(cfg.minibatch_size, B)
    stats: dict[str, float] = {}
    epochs_done = 0
    for _ in range(cfg.epochs):
        perm = torch.randperm(B, generator=generator)
        kls = []
        for start in range(0, B - mb + 1, mb):
            idx = perm[start : start + mb]
            out = policy({"obs": take_obs(obs, idx), "raw_actions": raw[idx]})
            a = normalize_advantages(adv[idx]) if cfg.norm_adv else adv[idx]
            loss, st = ppo_loss(
                out["log_prob"],
                old_logp[idx],
                a,
                out["value"],
                returns[idx],
                out["entropy"],
                clip=cfg.clip,
                old_value=old_v[idx],
                value_clip=cfg.value_clip,
                vf_coef=cfg.vf_coef,
                ent_coef=cfg.ent_coef,
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            optimizer.step()
            kls.append(float(st["approx_kl"]))
            stats = {k: float(v) for k, v in st.items()}
        epochs_done += 1
        if kl_early_stop(np.mean(kls), cfg.target_kl):
            break
    stats["epochs"] = epochs_done
    return stats


@dataclass
class TrainResult:
    env_steps: int
    wall_s: float
    success_rate: float
    reached: bool
    history: list[dict]


def train_ppo(
    env: BatchedEnv,
    policy,
    cfg: PPOConfig,
    *,
    max_env_steps: int,
    seed: int = 0,
    target_success: float | None = None,
    window: int = 100,
    eval_fn: Callable[[], float] | None = None,
    eval_every: int = 1,
    log: Callable[[dict], None] | None = None,
) -> TrainResult:
    """Train until ``max_env_steps`` env steps, or until the success criterion is met.

    The criterion: with ``eval_fn`` (returns a success rate), it must reach ``target_success``;
    otherwise the success rate of the last ``window`` training episodes must.
    """
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.lr, eps=1e-5, fused=True)
    tracker = EpisodeTracker(env.num_envs)
    obs = env.reset(seed=seed)
    steps, it, history = 0, 0, []
    t0 = time.perf_counter()
    rate, reached = 0.0, False
    while steps < max_env_steps:
        if cfg.anneal_lr:
            for g in optimizer.param_groups:
                g["lr"] = cfg.lr * max(1.0 - steps / max_env_steps, 0.05)
        rollout, obs = collect_rollout(env, policy, obs, cfg.num_steps, tracker, cfg.gamma)
        steps += cfg.num_steps * env.num_envs * policy.chunk_size
        stats = ppo_update(policy, optimizer, rollout, cfg, gen)
        if cfg.update_obs_norm and hasattr(policy, "update_obs_norm"):
            policy.update_obs_norm(rollout.obs["state"])
        it += 1
        if eval_fn is not None and it % eval_every == 0:
            rate = eval_fn()
        elif eval_fn is None:
            rate = tracker.success_rate(window) if len(tracker.finished) >= window else 0.0
        stats.update(env_steps=steps, success_rate=rate, wall_s=time.perf_counter() - t0)
        history.append(stats)
        if log:
            log(stats)
        if target_success is not None and rate >= target_success:
            reached = True
            break
    return TrainResult(steps, time.perf_counter() - t0, rate, reached, history)
