"""Options of ``sim.make("isaaclab/<task>", num_envs, **options)``, validated at the edge."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from rlinf_robot.envs.spec import ACTION_MODES
from rlinf_robot.errors import ConfigError


@dataclass(frozen=True)
class IsaacLabConfig:
    action_mode: str = "ee_delta"
    gripper: bool | None = None  # None: the task's own (lift has a gripper term, reach none)
    device: str = "cuda:0"
    headless: bool = True
    max_episode_steps: int | None = None  # None: the task's own episode length
    seed: int | None = None
    success_threshold: float | None = None  # m; None: the task's default (see tasks.py)
    randomization: Any = None  # Isaac Lab tasks randomize through their own event managers

    def __post_init__(self):
        if self.action_mode not in ACTION_MODES:
            raise ConfigError(f"action_mode {self.action_mode!r} not in {sorted(ACTION_MODES)}")
        if not (isinstance(self.device, str) and (self.device == "cpu" or self.device.startswith("cuda"))):
            raise ConfigError(f"device must be 'cpu' or 'cuda[:i]', got {self.device!r}")
        if self.max_episode_steps is not None and not (
            isinstance(self.max_episode_steps, int) and 1 <= self.max_episode_steps <= 100_000
        ):
            raise ConfigError(
                f"max_episode_steps must be an int in [1, 100000], got {self.max_episode_steps!r}"
            )
        if self.success_threshold is not None and not (0 < self.success_threshold < 1):
            raise ConfigError(f"success_threshold must be in (0, 1) m, got {self.success_threshold!r}")
        if self.randomization not in (None, False):
            raise ConfigError("randomization: configure Isaac Lab's event manager instead (env_cfg.events)")

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> IsaacLabConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ConfigError(f"unknown isaaclab env option(s) {unknown}; known: {sorted(known)}")
        return cls(**kwargs)
