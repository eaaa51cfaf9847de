"""Options of ``sim.make("robotwin/<task>", num_envs, **options)``, validated at the edge."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from typing import Any

from rlinf_robot.errors import ConfigError

ARMS = ("left", "right")


@dataclass(frozen=True)
class RoboTwinConfig:
    action_mode: str = "joint_delta"
    gripper: bool = True
    arm: str = "right"  # the arm our actions drive; the other holds still
    embodiment: tuple = ("franka-panda", "franka-panda", 0.6)  # RoboTwin: left, right, arm distance (m)
    control_hz: float = 10.0  # the rate the per-tick joint step limit is declared for
    max_episode_steps: int = 200
    image_size: int = 0  # 0: state only; else square crops of the head ("front") and wrist cameras
    assets_path: str | None = None  # RoboTwin assets (robotwin-download-assets); default $ASSETS_PATH
    planner_backend: str = "mplib"
    seed: int | None = None
    randomization: Any = None  # RoboTwin randomizes through task_config["domain_randomization"]

    def __post_init__(self):
        if self.action_mode != "joint_delta":
            raise ConfigError(
                f"action_mode {self.action_mode!r}: the RoboTwin runtime steps joint targets, use 'joint_delta'"
            )
        if self.arm not in ARMS:
            raise ConfigError(f"arm {self.arm!r} not in {list(ARMS)}")
        emb = tuple(self.embodiment)
        if not emb or any(not isinstance(e, str) for e in emb[:2]) or not str(emb[0]).startswith("franka"):
            raise ConfigError(f"embodiment {emb!r}: the adapter maps onto Franka arms ('franka-panda')")
        if not (
            isinstance(self.control_hz, (int, float))
            and math.isfinite(self.control_hz)
            and 1 <= self.control_hz <= 100
        ):
            raise ConfigError(f"control_hz must be in [1, 100], got {self.control_hz!r}")
        if not (isinstance(self.max_episode_steps, int) and 1 <= self.max_episode_steps <= 100_000):
            raise ConfigError(
                f"max_episode_steps must be an int in [1, 100000], got {self.max_episode_steps!r}"
            )
        if not (isinstance(self.image_size, int) and (self.image_size == 0 or 16 <= self.image_size <= 512)):
            raise ConfigError(f"image_size must be 0 or an int in [16, 512], got {self.image_size!r}")
        if self.planner_backend not in ("mplib", "curobo"):
            raise ConfigError(f"planner_backend {self.planner_backend!r} not in ['curobo', 'mplib']")
        if self.randomization not in (None, False):
            raise ConfigError("randomization: use RoboTwin's task_config domain_randomization instead")

    def assets(self) -> str:
        path = self.assets_path or os.environ.get("ASSETS_PATH")
        if not path:
            raise ConfigError(
                "assets_path: set it (or $ASSETS_PATH) to the RoboTwin assets (robotwin-download-assets)"
            )
        return path

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> RoboTwinConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ConfigError(f"unknown robotwin env option(s) {unknown}; known: {sorted(known)}")
        return cls(**kwargs)
