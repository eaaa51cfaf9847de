"""GRPO fine-tuning: G repeats of the same N starts, outcome rewards, group-relative advantages.

A group is one env index across the G repeats of ``env.reset(seed=s)`` (a seeded reset gives the
same start and instruction every time), so any deterministic-seeded batched env works unchanged.
Each repeat runs until every env has finished one episode; decisions after an env's end are masked.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlinf_robot.algorithms.grpo import gaussian_kl, group_relative_advantages, grpo_loss
from rlinf_robot.algorithms.loops.ppo_loop import TrainResult
from rlinf_robot.algorithms.loops.rollout import env_step, episode_success, flatten_obs, stack_obs, take_obs
from rlinf_robot.envs.spec import BatchedEnv
from rlinf_robot.errors import ConfigError

#: an episode's score for group ranking, from (won, summed reward, last step's reward), each [N]
OUTCOMES: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "success": lambda won, ret, last: won.astype(np.float32),
    "return": lambda won, ret, last: ret.astype(np.float32),
    # with terminate-on-success a summed dense reward pays for dawdling; the final one does not
    "progress": lambda won, ret, last: np.where(won, 1.0, 0.5 * last).astype(np.float32),
    # progress that also ranks successes by how well they ended (a group that all succeeds still
    # teaches margin): every success in [1, 1.5] stays above every failure in [0, 0.5]
    "margin": lambda won, ret, last: (won + 0.5 * last).astype(np.float32),
}

#: what a sampled episode's outcome is compared with (``GRPOConfig.baseline``)
BASELINES = ("group", "greedy")


@dataclass
class GRPOConfig:
    group_size: int = 4  # G repeats per start
    max_decisions: int = 64  # per episode (chunks)
    epochs: int = 4
    minibatch_size: int = 256
    lr: float = 1e-4
    clip: float = 0.2
    kl_coef: float = 0.0  # KL to the policy at the start of fine-tuning
    #: how that KL is measured: "k3" (Schulman's estimator from the stored action's log-probs under
    #: both policies; any policy) or "gaussian" (closed form from both policies' mean and log-std at
    #: the decision's observation; Gaussian heads). Per dimension, k3 from one sample has an
    #: exponential tail: one minibatch's estimate was seen at 58,272 (docs/learning.md)
    kl: str = "k3"
    #: what a group ranks its episodes by (``OUTCOMES``): "success" (the binary outcome), "return"
    #: (the episode's summed reward) or "progress" (1 on success, else half the task's dense reward
    #: at the episode's last step: failures ranked by how close they ended, never above a success)
    #: or "margin" (progress plus half the final dense reward on successes too, so a group whose
    #: episodes all succeed ranks them by how well they ended instead of carrying no signal)
    reward: str = "success"
    max_grad_norm: float = 1.0
    #: "chunk": one clipped ratio per decision, of the whole chunk's log-prob (the H x A dims
    #: together); "dim": one per action dimension of the chunk, as language-model GRPO takes one per
    #: token. A chunk's joint ratio moves ~sqrt(H x A) times as far as one dimension's for the same
    #: change of the mean, so at a narrow std nearly every chunk clips while the mean hardly moves.
    ratio: str = "chunk"
    #: False: the exploration std stays where SFT left it (the policy's ``std_parameters()``) and
    #: only the mean moves, so the update cannot buy advantage by widening or narrowing the std
    train_std: bool = True
    #: with the std held, the log-std GRPO explores with, set on the policy before the first round
    #: and before the KL reference is copied (None: as SFT left it). Evaluation acts with the mean,
    #: so a narrower exploration ranks the changes nearer the policy that is scored
    explore_log_std: float | None = None
    #: what each sampled episode is measured against: "group" (the mean of the G episodes from the
    #: same start, as GRPO) or "greedy" (one more episode per start acting with the mean action: the
    #: policy that evaluation scores). With "greedy" a sample's advantage is its outcome minus the
    #: greedy episode's, over the spread of all G + 1 outcomes: self-critical training (Rennie et al.
    #: 2017), so the update moves the mean toward what beats the deterministic policy and away from
    #: what does worse than it, and each round also reports that policy's success on its starts
    baseline: str = "group"

    def __post_init__(self):
        if self.reward not in OUTCOMES:
            raise ConfigError(f"grpo.reward must be one of {sorted(OUTCOMES)}, got {self.reward!r}")
        if self.ratio not in ("chunk", "dim"):
            raise ConfigError(f"grpo.ratio must be 'chunk' or 'dim', got {self.ratio!r}")
        if self.explore_log_std is not None and self.train_std:
            raise ConfigError("grpo.explore_log_std sets the held std: it needs grpo.train_std=False")
        if self.baseline not in BASELINES:
            raise ConfigError(f"grpo.baseline must be one of {BASELINES}, got {self.baseline!r}")
        if self.kl not in ("k3", "gaussian"):
            raise ConfigError(f"grpo.kl must be 'k3' or 'gaussian', got {self.kl!r}")


@dataclass
class GroupBatch:
    obs: dict  # flat [B, ...]
    raw_actions: torch.Tensor  # [B, H, A]
    log_prob: torch.Tensor  # [B] behaviour log-probs
    advantages: torch.Tensor  # [B]
    mask: torch.Tensor  # [B] decision happened inside the env's episode
    success_rate: float  # the sampled episodes'
    greedy_success: float | None = None  # the mean action's on the same starts (baseline="greedy")


@dataclass
class _Episodes:
    """One repeat: every env runs one episode from ``env.reset(seed)``; per-decision lists."""

    obs: list
    raw: list
    log_prob: list
    alive: list
    outcome: np.ndarray  # [N] the episode's score (``OUTCOMES[cfg.reward]``)
    won: np.ndarray  # [N] bool


def _run_episodes(env: BatchedEnv, policy, seed: int, cfg: GRPOConfig, deterministic: bool) -> _Episodes:
    N = env.num_envs
    ep = _Episodes([], [], [], [], np.zeros(N, np.float32), np.zeros(N, bool))
    obs = env.reset(seed=seed)
    alive = np.ones(N, bool)
    ret, last = np.zeros(N), np.zeros(N)
    for _ in range(cfg.max_decisions):
        out = policy.predict_action_batch(obs, deterministic=deterministic)
        ep.obs.append(obs)
        ep.raw.append(out.raw_actions)
        ep.log_prob.append(out.log_prob)
        ep.alive.append(alive.copy())
        obs, r, term, trunc, info = env_step(env, out.actions)
        done = term | trunc
        ret += np.where(alive, r, 0.0)
        last = np.where(alive, r, last)
        ep.won |= episode_success(info, term, trunc) & alive & done
        alive &= ~done
        if not alive.any():
            break
    ep.outcome = OUTCOMES[cfg.reward](ep.won, ret, last)
    return ep


@torch.no_grad()
def collect_groups(env: BatchedEnv, policy, seed: int, cfg: GRPOConfig) -> GroupBatch:
    """G sampled episodes from each of the env's N starts (and, for ``baseline="greedy"``, one
    acting with the mean action, used only as their baseline), with their advantages."""
    repeats = [_run_episodes(env, policy, seed, cfg, deterministic=False) for _ in range(cfg.group_size)]
    greedy = _run_episodes(env, policy, seed, cfg, deterministic=True) if cfg.baseline == "greedy" else None
    adv_ng = group_relative_advantages(  # [N, G]
        torch.as_tensor(np.stack([ep.outcome for ep in repeats], 1)),
        baseline=None if greedy is None else torch.as_tensor(greedy.outcome),
    )
    adv = torch.cat([adv_ng[:, g].expand(len(ep.obs), -1) for g, ep in enumerate(repeats)])  # [T, N]
    return GroupBatch(
        flatten_obs(stack_obs([o for ep in repeats for o in ep.obs])),
        torch.stack([r for ep in repeats for r in ep.raw]).flatten(0, 1),
        torch.stack([lp for ep in repeats for lp in ep.log_prob]).flatten(),
        adv.flatten(),
        torch.as_tensor(np.stack([m for ep in repeats for m in ep.alive])).flatten(),
        float(np.mean([ep.won.mean() for ep in repeats])),
        None if greedy is None else float(greedy.won.mean()),
    )


@torch.no_grad()
def _dim_log_probs(policy, batch: GroupBatch, rows: torch.Tensor, minibatch_size: int) -> torch.Tensor:
    """The behaviour policy's log-prob of every action dimension of ``rows`` [T, H * A] (zeros
    elsewhere). The update runs right after collection, so the policy still is the one that acted."""
    out = None
    for start in range(0, len(rows), minibatch_size):
        idx = rows[start : start + minibatch_size]
        per_dim = policy({"obs": take_obs(batch.obs, idx), "raw_actions": batch.raw_actions[idx]})
        if "dim_log_prob" not in per_dim:
            raise ConfigError(
                f"grpo.ratio='dim' needs a policy with per-dimension log-probs; {type(policy).__name__} has none"
            )
        if out is None:
            out = torch.zeros(len(batch.log_prob), per_dim["dim_log_prob"].shape[-1])
        out[idx] = per_dim["dim_log_prob"]
    return out


def _gaussian_kl(out: dict, ref: dict, name: str) -> torch.Tensor:
    """Closed-form KL per action dimension [B, H * A] from two forward outputs."""
    if "log_std" not in out:
        raise ConfigError(
            f"grpo.kl='gaussian' needs a Gaussian head with 'mean' and 'log_std'; {name} has none"
        )
    return gaussian_kl(out["mean"], out["log_std"], ref["mean"], ref["log_std"])


def grpo_update(policy, ref_policy, optimizer, batch: GroupBatch, cfg: GRPOConfig, generator=None) -> dict:
    """Clipped-ratio epochs over the decisions that carry signal (alive, non-zero advantage).

    Only the optimizer's parameters are clipped and stepped (a held std neither moves nor counts in
    the gradient norm), and a minibatch whose loss or gradient is not finite is skipped and counted
    (``nonfinite_skipped``) instead of writing NaN into every weight."""
    keep = torch.nonzero(batch.mask & (batch.advantages != 0)).flatten()
    stats: dict[str, float] = {"decisions": float(len(keep)), "nonfinite_skipped": 0.0}
    trained = [p for group in optimizer.param_groups for p in group["params"]]
    if len(keep) == 0:
        return stats
    key = "log_prob" if cfg.ratio == "chunk" else "dim_log_prob"
    old = batch.log_prob if cfg.ratio == "chunk" else _dim_log_probs(policy, batch, keep, cfg.minibatch_size)
    for _ in range(cfg.epochs):
        perm = keep[torch.randperm(len(keep), generator=generator)]
        for start in range(0, len(perm), cfg.minibatch_size):
            idx = perm[start : start + cfg.minibatch_size]
            mb_obs = take_obs(batch.obs, idx)
            out = policy({"obs": mb_obs, "raw_actions": batch.raw_actions[idx]})
            ref_logp, kl = None, None
            if ref_policy is not None and cfg.kl_coef > 0:
                with torch.no_grad():
                    ref = ref_policy({"obs": mb_obs, "raw_actions": batch.raw_actions[idx]})
                if cfg.kl == "gaussian":
                    kl = _gaussian_kl(out, ref, type(policy).__name__)
                    kl = kl if cfg.ratio == "dim" else kl.sum(-1)
                else:
                    ref_logp = ref[key]
            advantages = batch.advantages[idx]
            loss, st = grpo_loss(
                out[key],
                old[idx],
                advantages if cfg.ratio == "chunk" else advantages[:, None].expand_as(out[key]),
                clip=cfg.clip,
                ref_log_prob=ref_logp,
                kl_coef=cfg.kl_coef,
                kl=kl,
            )
            optimizer.zero_grad(set_to_none=True)
            if not torch.isfinite(loss):
                stats["nonfinite_skipped"] += 1
                continue
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(trained, cfg.max_grad_norm)
            if not torch.isfinite(norm):
                optimizer.zero_grad(set_to_none=True)
                stats["nonfinite_skipped"] += 1
                continue
            optimizer.step()
            stats.update({k: float(v) for k, v in st.items()})
    return stats


def train_grpo(
    env: BatchedEnv,
    policy,
    cfg: GRPOConfig,
    *,
    iterations: int,
    seed: int = 0,
    eval_fn: Callable[[], float] | None = None,
    log: Callable[[dict], None] | None = None,
) -> TrainResult:
    """``iterations`` rounds of (G x N episodes from one seed, GRPO update); a new seed each round."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    frozen: set[int] = set()
    if not cfg.train_std:
        stds = policy.std_parameters()
        if not stds:
            raise ConfigError(f"grpo.train_std=False: {type(policy).__name__} has no std parameter to hold")
        frozen = {id(p) for p in stds}
        if cfg.explore_log_std is not None:
            with torch.no_grad():
                for p in stds:
                    p.fill_(cfg.explore_log_std)
    ref = copy.deepcopy(policy).eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    trained = [p for p in policy.parameters() if p.requires_grad and id(p) not in frozen]
    optimizer = torch.optim.Adam(trained, lr=cfg.lr)
    steps, history, rate = 0, [], 0.0
    t0 = time.perf_counter()
    for it in range(iterations):
        t_round = time.perf_counter()
        batch = collect_groups(env, policy, seed=seed * 100_003 + it, cfg=cfg)
        round_steps = int(batch.mask.sum()) * policy.chunk_size
        steps += round_steps
        t_update = time.perf_counter()
        stats = grpo_update(policy, ref, optimizer, batch, cfg, gen)
        rollout_s, update_s = t_update - t_round, time.perf_counter() - t_update
        rate = eval_fn() if eval_fn is not None else batch.success_rate
        stats.update(
            iteration=it,
            env_steps=steps,
            # the split of a round's time: acting (policy inference + env steps, images rendered
            # included) against learning (cfg.epochs passes over the round's decisions)
            rollout_s=rollout_s,
            rollout_env_steps_per_s=round_steps / rollout_s,
            update_s=update_s,
            update_decisions_per_s=stats["decisions"] * cfg.epochs / update_s,
            rollout_success=batch.success_rate,
            **({} if batch.greedy_success is None else {"greedy_success": batch.greedy_success}),
            success_rate=rate,
            wall_s=time.perf_counter() - t0,
        )
        history.append(stats)
        if log:
            log(stats)
    return TrainResult(steps, time.perf_counter() - t0, rate, False, history)
