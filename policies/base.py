"""``BasePolicy``: what every policy gives the learner and the rollout workers.

- ``predict_action_batch(obs, deterministic=False) -> PolicyOutput``: env-ready actions ``[N, H, A]``
  (within the env's ``action_spec``), plus the chunk log-prob and value when the policy has them.
- ``forward(batch)`` for training: ``batch = {"obs": obs, "raw_actions": [N, H, A] (optional),
  "noise_scale": [N] (optional: score each row under the policy with its std times this, the
  distribution a robot exploring with a fraction of the noise acted with)}`` ->
  ``{"mean", "log_prob", "entropy", "value"}`` (keys the policy supports), plus ``"log_std"`` [N, H, A]
  where ``"mean"`` is an unsquashed Gaussian's (GRPO's closed-form KL reads both).
- ``action_spec``: the env's action space the policy was built for.

Policies act in a normalized space [-1, 1] per action dim and map to the env's ``[low, high]`` at
the edge, so the same network serves envs with different action scales.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from rlinf_robot.envs.spec import ActionSpec


@dataclass
class PolicyOutput:
    """One batched decision. ``raw_actions`` is what ``log_prob`` is of (normalized, unclipped)."""

    actions: np.ndarray
    raw_actions: Tensor
    log_prob: Tensor | None = None
    value: Tensor | None = None


class BasePolicy(nn.Module, abc.ABC):
    action_spec: ActionSpec
    chunk_size: int = 1
    #: Whether the policy reads camera images (then a state-only final observation cannot feed it).
    uses_images: bool = False

    def _init_action_space(self, action_spec: ActionSpec, chunk_size: int) -> None:
        self.action_spec = action_spec
        self.chunk_size = int(chunk_size)
        low = torch.tensor(action_spec.low, dtype=torch.float32)
        high = torch.tensor(action_spec.high, dtype=torch.float32)
        self.register_buffer("_act_center", (high + low) / 2, persistent=False)
        self.register_buffer("_act_half", (high - low) / 2, persistent=False)

    @property
    def action_dim(self) -> int:
        return int(self.action_spec.shape[0])

    def to_env_actions(self, raw: Tensor) -> np.ndarray:
        """Normalized [-1, 1] (clipped) -> env units: center + half_range * clip(raw, -1, 1)."""
        env = self._act_center + self._act_half * raw.clamp(-1.0, 1.0)
        return env.detach().cpu().numpy().astype(np.float32)

    def normalize_actions(self, actions: np.ndarray | Tensor) -> Tensor:
        """Env units -> normalized space (for demonstrations recorded in env units)."""
        a = torch.as_tensor(np.asarray(actions), dtype=torch.float32, device=self._act_center.device)
        return (a - self._act_center) / self._act_half

    def raw_from_normalized(self, actions: Tensor) -> Tensor:
        """The ``raw_actions`` (what log-probs are of) for normalized actions: identity for Gaussians,
        bin indices for token heads. Used to score demonstrations by likelihood."""
        return actions

    def std_parameters(self) -> list[nn.Parameter]:
        """The exploration std's parameters when they are the policy's own (not an output of the
        network), so an RL stage can hold them (``GRPOConfig.train_std``); none by default."""
        return []

    @abc.abstractmethod
    def forward(self, batch: dict) -> dict[str, Tensor]: ...

    @abc.abstractmethod
    def predict_action_batch(self, obs: dict, deterministic: bool = False) -> PolicyOutput: ...


def state_tensor(obs: dict, device: torch.device | str = "cpu") -> Tensor:
    """``obs["state"]`` as a float32 tensor (numpy or tensor in)."""
    return torch.as_tensor(obs["state"], dtype=torch.float32, device=device)


def image_tensors(obs: dict, cameras: list[str], device: torch.device | str = "cpu") -> list[Tensor]:
    """uint8 ``[N, H, W, 3]`` per camera -> float ``[N, 3, H, W]`` in [0, 1], in ``cameras`` order."""
    images = obs.get("images") or {}
    missing = [c for c in cameras if c not in images]
    if missing:
        raise KeyError(f"observation lacks cameras {missing}; has {sorted(images)}")
    out = []
    for cam in cameras:
        x = torch.as_tensor(images[cam], device=device)
        out.append(x.permute(0, 3, 1, 2).float().div_(255.0))
    return out
