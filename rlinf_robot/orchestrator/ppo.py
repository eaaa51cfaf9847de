"""The hybrid PPO recipe: how sim trajectories and real episodes become one update batch.

Sim data is on-policy: the rollout worker acted with the learner's current weights, so its
behaviour log-prob is also the proximal one. Real episodes were acted a few versions ago on the
arm: the learner evaluates them with its current weights (values for GAE, ``proximal_log_prob``)
and ``decoupled_ppo`` weights each real row by ``min(pi_prox / mu, rho_max)`` (Hilton et al. 2022).
The arm explores with a fraction of the policy's noise (``real_noise_scale``): its behaviour policy
is the policy with every std times that scale, and real rows are scored under exactly that policy
(``noise_scale`` per row, in the stored behaviour log-prob, the proximal one and the loss alike),
so a fresh real row gets PPO's loss for the policy the arm runs. Scored under the full-width policy
instead, ``pi_prox / mu`` of a typical draw is ~``scale ** dims`` (~0.04 per row at 0.3, measured
from a run's ``mean_is_weight``) and real rows barely steer the policy. Each batch holds
``real_fraction`` of its rows from the arm,
drawn from the fresh episodes (with replacement when the arm has produced fewer rows than that
share: real data is scarce and the share is what the learner is asked to weigh it by).

``PPORecipe`` is the job's recipe for ``algorithm=ppo`` (``orchestrator.recipe``): it asks the
actor for the values and proximal log-probs of what it is about to train on, builds the batch and
runs the epochs; the rest of this module is numpy/torch on the arrays the job collected.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlinf_robot.algorithms.ppo import compute_gae
from rlinf_robot.orchestrator.buffer import intervened_mask
from rlinf_robot.orchestrator.recipe import BatchInfo, JobRecipe, register_recipe
from rlinf_robot.settings import build, check, integer, number, text


@dataclass(frozen=True)
class PPOSettings:
    name: str = text("ppo")
    num_steps: int = integer(16, 1)
    epochs: int = integer(10, 1)
    minibatch_size: int = integer(256, 2)
    lr: float = number(1e-3, 0.0, lo_open=True)
    gamma: float = number(0.95, 0.0, 1.0, lo_open=True)
    lam: float = number(0.95, 0.0, 1.0)
    clip: float = number(0.2, 0.0, lo_open=True)
    vf_coef: float = number(0.5, 0.0)
    ent_coef: float = number(0.0)
    target_kl: float | None = number(0.02, 0.0, lo_open=True, optional=True)
    rho_max: float = number(1.0, 0.0, lo_open=True)
    max_grad_norm: float = number(0.5, 0.0, lo_open=True)
    #: Weight of the BC loss on demonstrations: RLinf-Co's real-arm demos (mode=cotrain) and the
    #: steps an operator intervened on (teleop). Without either it adds nothing.
    bc_coef: float = number(0.5, 0.0)

    def __post_init__(self):
        check(self, "algorithm (ppo)")

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> PPOSettings:
        return build(cls, raw, "algorithm (ppo)")

    def objective(self) -> tuple[str, dict[str, Any]]:
        return "decoupled_ppo", {
            "clip": self.clip,
            "rho_max": self.rho_max,
            "vf_coef": self.vf_coef,
            "ent_coef": self.ent_coef,
            "bc_coef": self.bc_coef,
        }

    def trainer(self) -> dict[str, Any]:
        return {"lr": self.lr, "max_grad_norm": self.max_grad_norm}


def _gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, next_value: np.ndarray, s: PPOSettings):
    # copies: the arrays may be read-only views of Ray's shared memory
    adv, ret = compute_gae(
        torch.tensor(rewards, dtype=torch.float32),
        torch.tensor(values, dtype=torch.float32),
        torch.tensor(dones, dtype=torch.float32),
        torch.tensor(next_value, dtype=torch.float32),
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
        "noise_scale": np.ones(T * N, np.float32),
        "real": np.zeros(T * N, bool),
        "intervened": np.zeros(T * N, bool),
    }


def episode_rows(
    ep: dict[str, Any], values: np.ndarray, proximal: np.ndarray, final_value: float, s: PPOSettings
) -> dict:
    """One real episode's rows. ``values`` / ``proximal`` [T]: the learner's current V and log-prob
    of each step (under the episode's ``noise_scale``); ``final_value``: V of the state that ended it (bootstrapped when truncated)."""
    rewards = ep["rewards"].astype(np.float32).copy()
    T = len(rewards)
    truncated = bool(ep["truncated"][-1]) and not bool(ep["terminated"][-1])
    rewards[-1] += s.gamma * final_value if truncated else 0.0
    dones = np.zeros(T, np.float32)
    dones[-1] = 1.0
    adv, ret = _gae(rewards[:, None], values[:, None], dones[:, None], np.zeros(1), s)
    intervened = intervened_mask(ep)
    # an operator's step has no behaviour log-prob (NaN): it is masked out of PPO's terms, and
    # the proximal one stands in so no NaN reaches the loss
    behaviour = np.where(intervened, proximal, ep["log_prob"]).astype(np.float32)
    return {
        "state": ep["states"][:-1],
        "raw_actions": ep["raw_actions"],
        "behaviour_log_prob": behaviour,
        "proximal_log_prob": proximal.astype(np.float32),
        "value": values.astype(np.float32),
        "advantages": adv[:, 0],
        "returns": ret[:, 0],
        "versions": ep["versions"],
        "noise_scale": np.full(T, episode_noise_scale(ep), np.float32),
        "real": np.ones(T, bool),
        "intervened": intervened,
    }


def intervention_rows(episodes: list[dict[str, Any]]) -> dict[str, np.ndarray] | None:
    """The operator's steps of ``episodes`` as demonstration rows (``demo_rows``' layout), or None."""
    parts = [(ep, intervened_mask(ep)) for ep in episodes]
    parts = [(ep, m) for ep, m in parts if m.any()]
    if not parts:
        return None
    return {
        "state": np.concatenate([ep["states"][: len(m)][m] for ep, m in parts]).astype(np.float32),
        "actions": np.concatenate([ep["actions"][m] for ep, m in parts]).astype(np.float32),
    }


def episode_noise_scale(ep: dict[str, Any]) -> float:
    """The scale of the policy's std the arm explored with in ``ep`` (1 for replays that predate it)."""
    return float(ep["meta"].get("noise_scale", 1.0))


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


def state_obs(states, instruction: str = "") -> dict:
    """A batch observation from states (the job's rows carry no images), with the task's
    instruction on every row for policies that read it (``tiny_vla``)."""
    return {"state": states, "images": {}, "instruction": [instruction] * len(states) if instruction else []}


def to_batch(rows: dict, instruction: str = "") -> dict:
    """Rows -> the tensors ``decoupled_ppo`` reads, advantages normalized per source."""
    adv = normalize_per_source(rows["advantages"].astype(np.float32), rows["real"])
    t = lambda x: torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float32)  # noqa: E731
    return {
        "obs": state_obs(t(rows["state"]), instruction),
        "raw_actions": t(rows["raw_actions"]),
        "behaviour_log_prob": t(rows["behaviour_log_prob"]),
        "proximal_log_prob": t(rows["proximal_log_prob"]),
        "noise_scale": t(rows["noise_scale"]),
        "value": t(rows["value"]),
        "advantages": t(adv),
        "returns": t(rows["returns"]),
        # an operator's steps take no part in PPO's terms (their demonstration rows clone them)
        "mask": t(~rows["intervened"]),
    }


def demo_rows(episodes: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Demonstration episodes (``RealEnvWorker.evaluate(expert=True)``) -> ``state`` and the
    expert's ``actions`` (env units, [n, H, A]) for ``with_demos``."""
    return {
        "state": np.concatenate([ep["states"][: len(ep["rewards"])] for ep in episodes]).astype(np.float32),
        "actions": np.concatenate([ep["actions"] for ep in episodes]).astype(np.float32),
    }


def with_demos(batch: dict, demos: dict[str, np.ndarray]) -> dict:
    """``batch`` (``to_batch``) plus demonstration rows for the auxiliary BC loss (RLinf-Co's
    real-arm demos, an operator's interventions): they carry ``bc_mask`` 1, ``bc_target`` and
    ``mask`` 0 (the demos take no part in PPO's terms); the RL rows keep their ``mask``."""
    n_rl, n_demo = len(batch["advantages"]), len(demos["state"])
    t = lambda x: torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float32)  # noqa: E731
    zeros = lambda like: torch.zeros((n_demo, *like.shape[1:]), dtype=like.dtype)  # noqa: E731
    out = {k: torch.cat([v, zeros(v)]) for k, v in batch.items() if k != "obs"}
    out["noise_scale"][n_rl:] = 1.0
    obs = batch["obs"]
    text = obs["instruction"][:1] * (n_rl + n_demo)
    out["obs"] = {**obs, "state": torch.cat([obs["state"], t(demos["state"])]), "instruction": text}
    out["mask"] = torch.cat([batch.get("mask", torch.ones(n_rl)), torch.zeros(n_demo)])
    out["bc_mask"] = torch.cat([torch.zeros(n_rl), torch.ones(n_demo)])
    out["bc_target"] = torch.cat([torch.zeros((n_rl, *demos["actions"].shape[1:])), t(demos["actions"])])
    return out


@register_recipe("ppo")
class PPORecipe(JobRecipe):
    """On-policy: sim rows are this update's rollout; real rows come from the source-tagged buffer
    (fresh within ``hybrid.max_staleness``, each episode at most ``hybrid.max_real_uses`` times)."""

    def __init__(self, settings: PPOSettings):
        self.s = settings
        self.num_steps = settings.num_steps

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> PPORecipe:
        return cls(PPOSettings.from_mapping(raw))

    def actor(self, policy: str, policy_cfg: dict[str, Any], seed: int):
        from rlinf_robot.workers.actor import ActorWorker

        objective, objective_cfg = self.s.objective()
        kwargs = dict(
            policy=policy,
            policy_cfg=policy_cfg,
            objective=objective,
            objective_cfg=objective_cfg,
            trainer=self.s.trainer(),
            seed=seed,
        )
        return ActorWorker, kwargs

    def update(self, job, traj, episodes, use_real):
        cfg, s = job.cfg, self.s
        actor = job.groups["actor"]
        fresh = job.buffer.fresh(job.state.version, cfg.hybrid.max_real_uses) if use_real else []
        # the learner's current view of what it trains on: values (GAE) and proximal log-probs
        eval_obs, slices = [], {}
        if traj is not None:
            T, N = traj["rewards"].shape
            slices["final"] = (0, T * N)
            slices["last"] = (T * N, T * N + N)
            eval_obs += [traj["final_states"].reshape(T * N, -1), traj["states"][-1]]
        at = sum(len(x) for x in eval_obs)
        for i, ep in enumerate(fresh):
            n = len(ep["rewards"])
            slices[i] = (at, at + n + 1)
            eval_obs += [ep["states"][:-1], ep["final_state"][None]]
            at += n + 1
        values, logps = {}, None
        if eval_obs:
            states = np.concatenate(eval_obs).astype(np.float32)
            raw, scale = _eval_raw(traj, fresh, len(states))
            batch = {"obs": state_obs(states, job.instruction), "raw_actions": raw, "noise_scale": scale}
            out = actor.call("evaluate", batch).wait(300)[0]  # collective
            values, logps = out["value"], out.get("log_prob")
        sim = None
        if traj is not None:
            a, b = slices["final"]
            c, d = slices["last"]
            sim = sim_rows(traj, values[a:b].reshape(T, N), values[c:d], s)
        real_parts = []
        for i, ep in enumerate(fresh):
            a, b = slices[i]
            real_parts.append(episode_rows(ep, values[a : b - 1], logps[a : b - 1], float(values[b - 1]), s))
        real = concat_rows(real_parts) if real_parts else None
        rows = mix(sim, real, cfg.hybrid.real_fraction if use_real else 0.0, job.rng)
        seed = zlib.crc32(f"{cfg.seed}/{job.state.update}".encode())
        batch = to_batch(rows, job.instruction)
        # BC rows: RLinf-Co's real-arm demonstrations (mode=cotrain) and the steps an operator
        # took over in the fresh real episodes
        operator = intervention_rows(fresh)
        demos = [d for d in (job.demos, operator) if d is not None]
        if demos:
            batch = with_demos(batch, concat_rows(demos))
        stats = actor.call("train_epochs", batch, s.epochs, s.minibatch_size, seed, s.target_kl).wait(600)[0]
        sim_mask = ~rows["real"]
        actor.call("update_obs_norm", rows["state"][sim_mask] if sim_mask.any() else rows["state"]).wait(120)
        stats["intervention_rows"] = 0 if operator is None else len(operator["state"])
        n_real = int(rows["real"].sum())
        lag = float(np.mean(job.state.version - rows["versions"][rows["real"]])) if n_real else None
        return stats, BatchInfo(len(rows["real"]), n_real, lag)


def _eval_raw(traj, fresh, n_states: int) -> tuple[np.ndarray, np.ndarray]:
    """Raw actions and their noise scales aligned with the states sent for evaluation (zeros and
    ones where only V is needed)."""
    shape = None
    if traj is not None:
        shape = traj["raw_actions"].shape[2:]
    elif fresh:
        shape = fresh[0]["raw_actions"].shape[1:]
    raw = np.zeros((n_states, *shape), np.float32)
    scale = np.ones(n_states, np.float32)
    at = 0
    if traj is not None:
        T, N = traj["rewards"].shape
        at = T * N + N
    for ep in fresh:
        n = len(ep["rewards"])
        raw[at : at + n] = ep["raw_actions"]
        scale[at : at + n] = episode_noise_scale(ep)
        at += n + 1
    return raw, scale
