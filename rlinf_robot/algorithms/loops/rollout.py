"""Rollout collection in action chunks and the observation batching it needs.

An observation batch is ``{"state": [B, S], "images": {cam: uint8 [B, H, W, 3]}, "instruction": [B]}``
(numpy or torch). Stacking T of them gives ``[T, N, ...]``; ``flatten_obs`` / ``take_obs`` turn that
into minibatches for the update.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from rlinf_robot.envs.spec import BatchedEnv


def stack_obs(obs_list: list[dict]) -> dict:
    """T observations of N envs -> ``{"state": Tensor[T, N, S], "images": {cam: Tensor[T, N, ...]}, ...}``."""
    out = {"state": torch.as_tensor(np.stack([o["state"] for o in obs_list]), dtype=torch.float32)}
    cams = obs_list[0].get("images") or {}
    out["images"] = {c: torch.as_tensor(np.stack([o["images"][c] for o in obs_list])) for c in cams}
    out["instruction"] = [list(o.get("instruction") or []) for o in obs_list]
    return out


def flatten_obs(obs: dict) -> dict:
    """``[T, N, ...]`` -> ``[T*N, ...]`` (instruction lists concatenated in the same order)."""
    flat = {"state": obs["state"].flatten(0, 1)}
    flat["images"] = {c: v.flatten(0, 1) for c, v in obs["images"].items()}
    flat["instruction"] = [s for row in obs["instruction"] for s in row]
    return flat


def take_obs(obs: dict, idx: Tensor) -> dict:
    """Rows ``idx`` of a flat observation batch."""
    out = {"state": obs["state"][idx], "images": {c: v[idx] for c, v in obs["images"].items()}}
    ins = obs.get("instruction") or []
    out["instruction"] = [ins[i] for i in idx.tolist()] if ins else []
    return out


@dataclass
class EpisodeTracker:
    """Per-env running returns; records (return, length, success) of every finished episode."""

    num_envs: int
    returns: np.ndarray = field(init=False)
    lengths: np.ndarray = field(init=False)
    finished: list[tuple[float, int, bool]] = field(default_factory=list)

    def __post_init__(self):
        self.returns = np.zeros(self.num_envs)
        self.lengths = np.zeros(self.num_envs, np.int64)

    def update(self, reward: np.ndarray, done: np.ndarray, success: np.ndarray, steps: int = 1) -> None:
        self.returns += reward
        self.lengths += steps
        for i in np.flatnonzero(done):
            self.finished.append((float(self.returns[i]), int(self.lengths[i]), bool(success[i])))
            self.returns[i] = 0.0
            self.lengths[i] = 0

    def success_rate(self, last: int | None = None) -> float:
        eps = self.finished[-last:] if last else self.finished
        return float(np.mean([s for _, _, s in eps])) if eps else 0.0


def episode_success(info: dict, terminated: np.ndarray, truncated: np.ndarray) -> np.ndarray:
    """Whether each env's episode ended in success: ``info["success"]``, the success of the state
    its last executed row left (``BatchedEnv`` stops an env at the end of its episode, so for a
    chunk this is the step it ended on). Rows of envs that did not end are filler."""
    return np.asarray(info.get("success", np.zeros_like(terminated)), bool) & (terminated | truncated)


def env_step(env: BatchedEnv, actions: np.ndarray):
    """One decision: ``step`` for chunks of length 1 (cheaper), ``chunk_step`` otherwise."""
    if actions.shape[1] == 1:
        return env.step(actions[:, 0])
    return env.chunk_step(actions)


def final_obs(info: dict, next_obs: dict, policy) -> dict | None:
    """The observation that ended each finished episode (before the env's auto-reset), if known.

    Envs report it as ``info["final_obs"]`` or, state only, ``info["final_state"]``; a state-only
    one is usable only by policies that do not read images. Rows of unfinished envs are filler.
    """
    if info.get("final_obs") is not None:
        return info["final_obs"]
    if info.get("final_state") is not None and not getattr(policy, "uses_images", False):
        return {"state": info["final_state"], "images": {}, "instruction": next_obs.get("instruction", [])}
    return None
