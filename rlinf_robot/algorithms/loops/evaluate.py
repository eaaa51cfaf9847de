"""Success rate of a policy over a fixed number of episodes on a batched env."""

from __future__ import annotations

import numpy as np
import torch

from rlinf_robot.algorithms.loops.rollout import env_step, episode_success
from rlinf_robot.envs.spec import BatchedEnv


@torch.no_grad()
def evaluate(
    env: BatchedEnv,
    policy,
    episodes: int,
    seed: int = 1234,
    deterministic: bool = True,
    max_decisions: int = 10_000,
) -> float:
    """Run until ``episodes`` episodes have finished (the first ``episodes`` to finish count)."""
    obs = env.reset(seed=seed)
    results: list[bool] = []
    for _ in range(max_decisions):
        out = policy.predict_action_batch(obs, deterministic=deterministic)
        obs, _, term, trunc, info = env_step(env, out.actions)
        success = episode_success(info, term, trunc)
        for i in np.flatnonzero(term | trunc):
            results.append(bool(success[i]))
        if len(results) >= episodes:
            break
    return float(np.mean(results[:episodes])) if results else 0.0
