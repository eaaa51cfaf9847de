"""The hybrid PPO recipe: how sim trajectories and real episodes become one update batch.

Sim data is on-policy: the rollout worker acted with the learner's current weights, so its
behaviour log-prob is also the proximal one. Real episodes were acted a few versions ago on the
arm: the learner evaluates them with its current weights (values for GAE, ``proximal_log_prob``)
and ``decoupled_ppo`` weights each real row by ``min(pi_prox / mu, rho_max)`` (Hilton et al. 2022).
Fresh rows get exactly PPO's loss only when the arm explores with the policy's own noise
(``real_noise_scale`` 1): with narrower noise ``mu`` is the narrower Gaussian, ``pi_prox / mu`` is
far below 1 for a typical draw (~0.04 per row at the default 0.3, measured from a run's
``mean_is_weight``), and real rows steer the policy little while still training the critic. Each batch holds ``real_fraction`` of its rows from the arm,
drawn from the fresh episodes (with replacement when the arm has produced fewer rows than that
share: real data is scarce and the share is what the learner is asked to weigh it by).

Everything here is numpy/torch on arrays the job collected; the job (``orchestrator.job``) does
the worker calls.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from rlinf_robot.algorithms.ppo import compute_gae
from rlinf_robot.errors import ConfigError


@dataclass(frozen=True)
class PPOSettings:
    name: str = "ppo"
    num_steps: int = 16
    epochs: int = 10
    minibatch_size: int = 256
    lr: float = 1e-3
    gamma: float = 0.95
    lam: float = 0.95
    clip: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    target_kl: float | None = 0.02
    rho_max: float = 1.0
    max_grad_norm: float = 0.5

    def __post_init__(self):
        checks = {
            "num_steps": self.num_steps >= 1,
            "epochs": self.epochs >= 1,
            "minibatch_size": self.minibatch_size >= 2,
            "lr": self.lr > 0,
            "gamma": 0 < self.gamma <= 1,
            "lam": 0 <= self.lam <= 1,
            "clip": self.clip > 0,
            "rho_max": self.rho_max > 0,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ConfigError(f"algorithm (ppo): bad value for {bad}: {[getattr(self, k) for k in bad]}")

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> PPOSettings:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(f"algorithm (ppo): unknown key(s) {unknown}; known: {sorted(known)}")
        try:
            return cls(**raw)
        except TypeError as e:
            raise ConfigError(f"algorithm (ppo): {e}") from None

    def objective(self) -> tuple[str, dict[str, Any]]:
        return "decoupled_ppo", {
            "clip": self.clip,
            "rho_max": self.rho_max,
            "vf_coef": self.vf_coef,
            "ent_coef": self.ent_coef,
        }

    def trainer(self) -> dict[str, Any]:
        return {"lr": self.lr, "max_grad_norm": self.max_grad_norm}


def _gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, next_value: np.ndarray, s: PPOSettings):
    adv, ret = compute_gae(
        torch.as_tensor(rewards, dtype=torch.float32),
        torch.as_tensor(values, dtype=torch.float32),
        torch.as_tensor(dones, dtype=torch.float32),
        torch.as_tensor(next_value, dtype=torch.float32),
        s.gamma,
        s.lam,
    )
    return adv.numpy(), ret.numpy()


def sim_rows(traj: dict[str, Any], final_values: np.ndarray, last_values: np.ndarray, s: PPOSettings) -> dict:
    """One update's rows from a collected sim trajectory ``[T, N]`` (``SimEnvWorker.rollout``).

    ``final_values`` [T, N]: V of each ``final_states`` row (used where an episode was truncated,
    r_t += gamma V(final)); ``last_values`` [N]: V of the states after the last step.
    """
    rewards = traj["rewards"].astype(np.float32).copy()
    trunc, term = traj["truncated"], traj["terminated"]
    rewards += np.where(trunc & ~term, s.gamma * final_values, 0.0).astype(np.float32)
    dones = (term | trunc).astype(np.float32)
    adv, ret = _gae(rewards, traj["value"], dones, last_values, s)
    T, N = rewards.shape
    flat = lambda x: x.reshape(T * N, *x.shape[2:])  # noqa: E731
    return {
        "state": flat(traj["states"][:-1]),
        "raw_actions": flat(traj["raw_actions"]),
        "behaviour_log_prob": flat(traj["log_prob"]),
        "proximal_log_prob": flat(traj["log_prob"]),
        "value": flat(traj["value"]),
        "advantages": flat(adv),
        "returns": flat(ret),
        "versions": np.repeat(traj["versions"][:, :1], N, axis=1).reshape(-1),
        "real": np.zeros(T * N, bool),
    }


def episode_rows(
    ep: dict[str, Any], values: np.ndarray, proximal: np.ndarray, final_value: float, s: PPOSettings
) -> dict:
    """One real episode's rows. ``values`` / ``proximal`` [T]: the learner's current V and log-prob
    of each step; ``final_value``: V of the state that ended it (bootstrapped when truncated)."""
    rewards = ep["rewards"].astype(np.float32).copy()
    T = len(rewards)
    truncated = bool(ep["truncated"][-1]) and not bool(ep["terminated"][-1])
    rewards[-1] += s.gamma * final_value if truncated else 0.0
    dones = np.zeros(T, np.float32)
    dones[-1] = 1.0
    adv, ret = _gae(rewards[:, None], values[:, None], dones[:, None], np.zeros(1), s)
    return {
        "state": ep["states"][:-1],
        "raw_actions": ep["raw_actions"],
        "behaviour_log_prob": ep["log_prob"].astype(np.float32),
        "proximal_log_prob": proximal.astype(np.float32),
        "value": values.astype(np.float32),
        "advantages": adv[:, 0],
        "returns": ret[:, 0],
        "versions": ep["versions"],
        "real": np.ones(T, bool),
    }


def concat_rows(parts: list[dict]) -> dict:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def mix(sim: dict | None, real: dict | None, real_fraction: float, rng: np.random.Generator) -> dict:
    """The update batch: all sim rows plus real rows making ``real_fraction`` of the batch (drawn
    from ``real`` without replacement when there are enough, with replacement otherwise). Without
    sim rows (a real-only job) every real row is used once."""
    if sim is None:
        if real is None:
            raise ValueError("nothing to train on")
        return real
    if real is None or real_fraction <= 0:
        return sim
    n_sim = len(sim["advantages"])
    n_real = int(round(real_fraction / (1.0 - real_fraction) * n_sim))
    have = len(real["advantages"])
    idx = rng.choice(have, size=n_real, replace=have < n_real)
    picked = {k: v[idx] for k, v in real.items()}
    return concat_rows([sim, picked])


def normalize_per_source(adv: np.ndarray, real: np.ndarray) -> np.ndarray:
    """Advantages normalized within each source. One critic sees the same states in sim and on the
    arm but the arm's returns are lower (it is slower): normalized together, every real row's
    advantage is negative, and the policy learns to avoid whatever it did on the arm - including
    what went well there. Per source, a real row is judged against the arm's own average."""
    out = np.empty_like(adv, dtype=np.float32)
    for mask in (real, ~real):
        if mask.any():
            a = adv[mask]
            out[mask] = (a - a.mean()) / (a.std() + 1e-8)
    return out


def to_batch(rows: dict) -> dict:
    """Rows -> the tensors ``decoupled_ppo`` reads, advantages normalized per source."""
    adv = normalize_per_source(rows["advantages"].astype(np.float32), rows["real"])
    t = lambda x: torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float32)  # noqa: E731
    return {
        "obs": {"state": t(rows["state"]), "images": {}, "instruction": []},
        "raw_actions": t(rows["raw_actions"]),
        "behaviour_log_prob": t(rows["behaviour_log_prob"]),
        "proximal_log_prob": t(rows["proximal_log_prob"]),
        "value": t(rows["value"]),
        "advantages": t(adv),
        "returns": t(rows["returns"]),
    }
