"""Success of a policy over a fixed number of episodes on a batched env, and a paired comparison of
two policies on the same episodes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from rlinf_robot.algorithms.loops.rollout import env_step, episode_success
from rlinf_robot.envs.spec import BatchedEnv


@torch.no_grad()
def episode_outcomes(
    env: BatchedEnv,
    policy,
    episodes: int,
    seed: int = 1234,
    deterministic: bool = True,
    max_decisions: int = 10_000,
    execute_rows: int | None = None,
) -> np.ndarray:
    """Success (bool) of each of the first ``episodes`` episodes to finish, in the order they finished
    (fewer if ``max_decisions`` ran out).

    When every episode runs to its time limit (``terminate_on_success=False``) all slots reset at the
    same steps, so in an env whose starts do not depend on the actions (the embedded envs draw each
    slot's layouts from its own generator seeded by ``seed``) the i-th outcome of any two policies is
    the same start: their outcomes are paired (``compare_paired``). With early termination the first
    to finish are not a fixed set of starts (and lean towards the short episodes).

    ``execute_rows``: run only the first rows of each predicted chunk, then predict again from the
    new observation (a receding horizon, openpi's replan steps); ``None`` runs the whole chunk. Under
    delta-chunk semantics a chunk's prefix is a complete command, so this changes only how often the
    policy sees the scene."""
    if execute_rows is not None and not (isinstance(execute_rows, int) and execute_rows >= 1):
        raise ValueError(f"execute_rows must be an int >= 1 or None, got {execute_rows!r}")
    obs = env.reset(seed=seed)
    results: list[bool] = []
    for _ in range(max_decisions):
        out = policy.predict_action_batch(obs, deterministic=deterministic)
        obs, _, term, trunc, info = env_step(env, out.actions[:, :execute_rows])
        success = episode_success(info, term, trunc)
        for i in np.flatnonzero(term | trunc):
            results.append(bool(success[i]))
        if len(results) >= episodes:
            break
    return np.asarray(results[:episodes], dtype=bool)


def success_rate(outcomes: np.ndarray) -> float:
    """The share of ``episode_outcomes`` that succeeded (0 when no episode finished)."""
    return float(outcomes.mean()) if outcomes.size else 0.0


def evaluate(env: BatchedEnv, policy, episodes: int, **kwargs) -> float:
    """Success rate over the first ``episodes`` episodes to finish (``episode_outcomes``' options)."""
    return success_rate(episode_outcomes(env, policy, episodes, **kwargs))


@dataclass(frozen=True)
class PairedComparison:
    """Policy B against policy A on the same episodes. Only the episodes where they differ say which
    is better (McNemar): ``wins`` B succeeded where A failed, ``losses`` the reverse; ``p_value`` is
    the exact two-sided sign test of wins against losses (how often a coin would split them at
    least this unevenly), so a gain of a few episodes out of hundreds reads as the noise it is."""

    episodes: int
    before: float  # A's success rate
    after: float  # B's success rate
    wins: int
    losses: int
    p_value: float

    def __str__(self) -> str:
        return (
            f"{self.before:.3f} -> {self.after:.3f} over {self.episodes} paired episodes "
            f"(+{self.wins} / -{self.losses}, p={self.p_value:.2g})"
        )


def compare_paired(before: np.ndarray, after: np.ndarray) -> PairedComparison:
    """``PairedComparison`` of two outcome arrays of the same episodes (``episode_outcomes``)."""
    a, b = np.asarray(before, dtype=bool), np.asarray(after, dtype=bool)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(
            f"paired outcomes must be two equal, non-empty 1-D arrays, got {a.shape} and {b.shape}"
        )
    wins, losses = int(np.sum(b & ~a)), int(np.sum(a & ~b))
    n, k = wins + losses, min(wins, losses)
    p = min(1.0, 2.0 * sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n) if n else 1.0
    return PairedComparison(a.size, float(a.mean()), float(b.mean()), wins, losses, p)
