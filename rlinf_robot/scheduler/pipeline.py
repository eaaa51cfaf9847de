"""Fine-grained pipelining of env stepping and policy inference over micro-batches.

The env batch is cut into ``stages`` micro-batches. While the env steps micro-batch *s*, the
policy (another process) infers actions for micro-batch *s+1*, so with two stages and equal costs
the env and the policy are both busy almost all the time. With one stage the same loop is the
sequential baseline: step everything, then infer everything.

The loop is written against three callables so it does not care what sits behind them (a Ray
actor, a thread, a function in the same process)::

    submit(stage, obs) -> handle      # start inference for one micro-batch (must not block)
    collect(handle)    -> actions     # wait for it
    step(stage, actions) -> obs       # step that micro-batch's envs

Per-stage spans go to a ``Timeline`` (exported as Chrome trace JSON): ``wait_actions`` shows the
env waiting on the policy, ``env_step`` the env working.

>>> log = []
>>> def submit(s, obs): log.append(("infer", s, obs)); return obs + 1
>>> def step(s, act): log.append(("step", s, act)); return act * 10
>>> run_pipeline([0, 100], 2, submit, lambda h: h, step)
>>> [e[:2] for e in log]
[('infer', 0), ('infer', 1), ('step', 0), ('infer', 0), ('step', 1), ('infer', 1), ('step', 0), ('step', 1)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rlinf_robot.scheduler.timeline import Timeline


def run_pipeline(
    first_obs: Sequence[Any],
    num_steps: int,
    submit: Callable[[int, Any], Any],
    collect: Callable[[Any], Any],
    step: Callable[[int, Any], Any],
    timeline: Timeline | None = None,
) -> None:
    """Run ``num_steps`` env steps of every stage, overlapping stage s's step with s+1's inference."""
    tl = timeline or Timeline("pipeline", enabled=False)
    stages = len(first_obs)
    if stages < 1 or num_steps < 0:
        raise ValueError(f"need >= 1 stage and >= 0 steps, got {stages} stages, {num_steps} steps")
    if num_steps == 0:
        return
    with tl.span("submit", stage=0, t=-1):
        pending = [submit(s, first_obs[s]) for s in range(stages)]
    for t in range(num_steps):
        last = t == num_steps - 1
        for s in range(stages):
            with tl.span("wait_actions", stage=s, t=t):
                actions = collect(pending[s])
            with tl.span("env_step", stage=s, t=t):
                obs = step(s, actions)
            if not last:
                with tl.span("submit", stage=s, t=t):
                    pending[s] = submit(s, obs)


def stage_bounds(num_items: int, stages: int) -> list[tuple[int, int]]:
    """Split ``num_items`` (envs or env shards) into ``stages`` contiguous, near-equal ranges.

    >>> stage_bounds(5, 2)
    [(0, 2), (2, 5)]
    """
    if not 1 <= stages <= num_items:
        raise ValueError(f"pipeline_stages must be in [1, {num_items}], got {stages}")
    edges = [round(i * num_items / stages) for i in range(stages + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def concat_obs(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Concatenate batched observation dicts along the env axis (state, images, instruction)."""
    if len(parts) == 1:
        return parts[0]
    out: dict[str, Any] = {"state": np.concatenate([p["state"] for p in parts])}
    cams = parts[0].get("images") or {}
    out["images"] = {c: np.concatenate([p["images"][c] for p in parts]) for c in cams}
    out["instruction"] = [s for p in parts for s in p.get("instruction", [])]
    return out
