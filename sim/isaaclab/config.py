"""Options of ``sim.make("isaaclab/<task>", num_envs, **options)``, validated at the edge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlinf_robot.envs.spec import ACTION_MODES
from rlinf_robot.errors import ConfigError
from rlinf_robot.settings import check, flag, integer, number, text


@dataclass(frozen=True)
class IsaacLabConfig:
    action_mode: str = text("ee_delta", sorted(ACTION_MODES))
    gripper: bool | None = flag(
        None, optional=True
    )  # None: the task's own (lift has a gripper term, reach none)
    device: str = "cuda:0"
    headless: bool = flag(True)
    max_episode_steps: int | None = integer(None, 1, 100_000, optional=True)  # None: the task's own length
    seed: int | None = integer(None, optional=True)
    success_threshold: float | None = number(
        None, 0.0, 1.0, lo_open=True, optional=True
    )  # m; None: the task's
    randomization: Any = None  # Isaac Lab tasks randomize through their own event managers

    def __post_init__(self):
        check(self, "isaaclab env options")
        if not (isinstance(self.device, str) and (self.device == "cpu" or self.device.startswith("cuda"))):
            raise ConfigError(f"device must be 'cpu' or 'cuda[:i]', got {self.device!r}")
        if self.randomization not in (None, False):
            raise ConfigError("randomization: configure Isaac Lab's event manager instead (env_cfg.events)")
