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
    execute_rows: int | None = None,
) -> float:
    """Run until ``episodes`` episodes have finished (the first ``episodes`` to finish count).

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
    return float(np.mean(results[:episodes])) if results else 0.0
