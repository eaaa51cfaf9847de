"""Options of ``sim.make("robotwin/<task>", num_envs, **options)``, validated at the edge."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from rlinf_robot.errors import ConfigError
from rlinf_robot.settings import check, flag, integer, number, text

ARMS = ("left", "right")


@dataclass(frozen=True)
class RoboTwinConfig:
    action_mode: str = "joint_delta"
    gripper: bool = flag(True)
    arm: str = text("right", ARMS)  # the arm our actions drive; the other holds still
    embodiment: tuple = ("franka-panda", "franka-panda", 0.6)  # RoboTwin: left, right, arm distance (m)
    control_hz: float = number(10.0, 1, 100)  # the rate the per-tick joint step limit is declared for
    max_episode_steps: int = integer(200, 1, 100_000)
    image_size: int = 0  # 0: state only; else square crops of the head ("front") and wrist cameras
    assets_path: str | None = None  # RoboTwin assets (robotwin-download-assets); default $ASSETS_PATH
    planner_backend: str = text("mplib", ("mplib", "curobo"))
    seed: int | None = integer(None, optional=True)
    randomization: Any = None  # RoboTwin randomizes through task_config["domain_randomization"]

    def __post_init__(self):
        check(self, "robotwin env options")
        if self.action_mode != "joint_delta":
            raise ConfigError(
                f"action_mode {self.action_mode!r}: the RoboTwin runtime steps joint targets, use 'joint_delta'"
            )
        emb = tuple(self.embodiment)
        if not emb or any(not isinstance(e, str) for e in emb[:2]) or not str(emb[0]).startswith("franka"):
            raise ConfigError(f"embodiment {emb!r}: the adapter maps onto Franka arms ('franka-panda')")
        if not (isinstance(self.image_size, int) and (self.image_size == 0 or 16 <= self.image_size <= 512)):
            raise ConfigError(f"image_size must be 0 or an int in [16, 512], got {self.image_size!r}")
        if self.randomization not in (None, False):
            raise ConfigError("randomization: use RoboTwin's task_config domain_randomization instead")

    def assets(self) -> str:
        path = self.assets_path or os.environ.get("ASSETS_PATH")
        if not path:
            raise ConfigError(
                "assets_path: set it (or $ASSETS_PATH) to the RoboTwin assets (robotwin-download-assets)"
            )
        return path
