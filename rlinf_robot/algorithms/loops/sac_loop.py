"""Off-policy SAC / RLPD: step a batched env, store transitions, many critic updates per step.

``demos`` turns SAC into RLPD: every batch is half demonstrations, half online data, and the critic
ensemble (``num_critics`` = 10, LayerNorm) takes its target min over a random pair. Actions live in the
policy's normalized space [-1, 1] (tanh-squashed), mapped to env units by the policy.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlinf_robot.algorithms.buffers import ReplayBuffer
from rlinf_robot.algorithms.loops.ppo_loop import TrainResult
from rlinf_robot.algorithms.loops.rollout import EpisodeTracker, episode_success, final_obs
from rlinf_robot.algorithms.rlpd import subset_min, symmetric_sample
from rlinf_robot.algorithms.sac import (
    sac_actor_loss,
    sac_critic_loss,
    sac_q_target,
    soft_update,
    temperature_loss,
)
from rlinf_robot.envs.spec import BatchedEnv
from rlinf_robot.errors import ConfigError


@dataclass
class SACConfig:
    batch_size: int = 256
    lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    utd: float = 1.0  # gradient updates per env transition
    learning_starts: int = 1000  # env transitions of uniform random actions before learning
    buffer_size: int = 200_000
    num_critics: int = 2
    num_min: int = 2  # target min over a random subset of this many critics
    layer_norm: bool = False
    critic_hidden: tuple[int, ...] = (256, 256)
    init_alpha: float = 0.1
    target_entropy: float | None = None  # default -dim(action chunk)
    actor_reduce: str = "min"  # "mean" for RLPD
    actor_delay: int = 1  # actor/temperature update every k critic updates

    def __post_init__(self):
        if self.num_min > self.num_critics:
            raise ConfigError(f"sac.num_min ({self.num_min}) must be <= sac.num_critics ({self.num_critics})")
        if self.utd <= 0 or self.batch_size < 2:
            raise ConfigError("sac.utd must be > 0 and sac.batch_size >= 2")

    @classmethod
    def rlpd(cls, **kw) -> SACConfig:
        """RLPD's recipe: LayerNorm ensemble of 10, min over 2, mean-Q actor, high UTD."""
        base = dict(num_critics=10, num_min=2, layer_norm=True, actor_reduce="mean", utd=4.0)
        return cls(**{**base, **kw})


class SACLearner:
    """Critic ensemble, target critics, temperature and the three optimizers around an actor."""

    def __init__(self, policy, cfg: SACConfig, state_dim: int):
        from policies.mlp import QEnsemble

        self.policy, self.cfg = policy, cfg
        act_dim = policy.chunk_size * policy.action_dim
        self.critic = QEnsemble(state_dim, act_dim, cfg.num_critics, cfg.critic_hidden, cfg.layer_norm)
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(cfg.init_alpha), requires_grad=True)
        self.target_entropy = -float(act_dim) if cfg.target_entropy is None else cfg.target_entropy
        self.actor_opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr, fused=True)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.lr, fused=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.lr)
        self.updates = 0

    def features(self, state: torch.Tensor) -> torch.Tensor:
        return self.policy.obs_norm(state)

    def update(self, batch: dict, generator: torch.Generator | None = None) -> dict[str, float]:
        cfg, alpha = self.cfg, self.log_alpha.exp().detach()
        s, a, r, s2, d = batch["state"], batch["action"], batch["reward"], batch["next_state"], batch["done"]
        with torch.no_grad():
            a2, logp2 = self.policy.sample({"state": s2})
            q2 = self.target(self.features(s2), a2)
            if cfg.num_min < cfg.num_critics:
                q2 = subset_min(q2, cfg.num_min, generator)
            y = sac_q_target(r, d, q2, logp2, alpha, cfg.gamma)
        critic_loss = sac_critic_loss(self.critic(self.features(s), a), y)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        soft_update(self.target, self.critic, cfg.tau)
        self.updates += 1
        stats = {"critic_loss": critic_loss.item(), "alpha": alpha.item()}
        if self.updates % cfg.actor_delay:
            return stats
        a_pi, logp = self.policy.sample({"state": s})
        self.critic.requires_grad_(False)
        actor_loss = sac_actor_loss(self.critic(self.features(s), a_pi), logp, alpha, cfg.actor_reduce)
        self.critic.requires_grad_(True)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        alpha_loss = temperature_loss(self.log_alpha, logp, self.target_entropy)
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()
        stats.update(actor_loss=actor_loss.item(), entropy=-logp.mean().item())
        return stats


def train_sac(
    env: BatchedEnv,
    policy,
    cfg: SACConfig,
    *,
    max_env_steps: int,
    seed: int = 0,
    demos: ReplayBuffer | None = None,
    target_success: float | None = None,
    window: int = 50,
    eval_fn: Callable[[], float] | None = None,
    eval_every_steps: int = 2000,
    log: Callable[[dict], None] | None = None,
) -> TrainResult:
    """Train a tanh-squashed ``policy`` (``policies.make("mlp", squash=True, ...)``) with SAC/RLPD."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    obs = env.reset(seed=seed)
    state_dim = obs["state"].shape[1]
    learner = SACLearner(policy, cfg, state_dim)
    online = ReplayBuffer(cfg.buffer_size)
    tracker = EpisodeTracker(env.num_envs)
    N, H, A = env.num_envs, policy.chunk_size, policy.action_dim
    steps, history, debt, next_eval = 0, [], 0.0, eval_every_steps
    rate, reached = 0.0, False
    t0 = time.perf_counter()
    while steps < max_env_steps:
        state = torch.as_tensor(obs["state"], dtype=torch.float32)
        if steps < cfg.learning_starts and demos is None:
            raw = torch.as_tensor(rng.uniform(-1, 1, (N, H, A)), dtype=torch.float32)
            actions = policy.to_env_actions(raw)
        else:
            out = policy.predict_action_batch(obs)
            raw, actions = out.raw_actions, out.actions
        obs, reward, term, trunc, info = env.step(actions[:, 0]) if H == 1 else env.chunk_step(actions)
        final = final_obs(info, obs, policy)
        next_state = torch.as_tensor(obs["state"], dtype=torch.float32).clone()
        done_for_target = term.copy()
        if final is not None:
            next_state[torch.as_tensor(term | trunc)] = torch.as_tensor(final["state"], dtype=torch.float32)[
                torch.as_tensor(term | trunc)
            ]
        else:
            done_for_target |= trunc  # no final obs: cannot bootstrap a truncation
        online.add(
            state=state,
            action=raw.flatten(1),
            reward=torch.as_tensor(reward, dtype=torch.float32),
            next_state=next_state,
            done=torch.as_tensor(done_for_target, dtype=torch.float32),
        )
        tracker.update(reward, term | trunc, episode_success(info, term, trunc), steps=H)
        steps += N * H
        if steps >= cfg.learning_starts or demos is not None:
            debt += cfg.utd * N
            stats = {}
            while debt >= 1.0:
                if demos is not None:
                    batch = symmetric_sample(demos, online, cfg.batch_size, gen)
                else:
                    batch = online.sample(cfg.batch_size, gen)
                stats = learner.update(batch, gen)
                debt -= 1.0
            if eval_fn is not None and steps >= next_eval:
                rate, next_eval = eval_fn(), next_eval + eval_every_steps
            elif eval_fn is None and len(tracker.finished) >= window:
                rate = tracker.success_rate(window)
            if stats:
                stats.update(env_steps=steps, success_rate=rate, wall_s=time.perf_counter() - t0)
                history.append(stats)
                if log and len(history) % 50 == 0:
                    log(stats)
            if target_success is not None and rate >= target_success:
                reached = True
                break
    return TrainResult(steps, time.perf_counter() - t0, rate, reached, history)
