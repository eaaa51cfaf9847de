"""Typed configuration of the embedded MuJoCo envs, validated once at construction."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from rlinf_robot.envs.spec import ACTION_MODES
from rlinf_robot.errors import ConfigError
from sim.randomization import DomainRandomization, resolve

CAMERAS = ("wrist", "front")
PHYSICS_DT = 0.002  # s, the FR3 model's timestep (franka-sim uses the same)


@dataclass(frozen=True)
class MujocoConfig:
    """Options of ``sim.make("mujoco/<task>", num_envs, **options)``.

    ``control_hz`` must divide the 500 Hz physics rate; each control tick runs ``500 / control_hz``
    physics substeps with the joint targets held, as the franka node holds its target between ticks.
    ``gripper``/``max_episode_steps`` default to the task's own values (None).
    """

    action_mode: str = "ee_delta"
    gripper: bool | None = None
    control_hz: float = 20.0
    max_episode_steps: int | None = None
    image_size: int = 0  # 0: state only; else square images of this size (64-128 typical)
    cameras: tuple[str, ...] = CAMERAS
    full_meshes: bool = False  # render the visual meshes (slow on OSMesa) instead of collision geoms
    num_threads: int = 0  # physics threads; 0: one per CPU core available, at most 1 per 4 envs
    terminate_on_success: bool = True
    randomization: DomainRandomization | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # task-specific options

    @property
    def substeps(self) -> int:
        return round(1.0 / (self.control_hz * PHYSICS_DT))

    def __post_init__(self):
        if self.action_mode not in ACTION_MODES:
            raise ConfigError(f"action_mode {self.action_mode!r} not in {sorted(ACTION_MODES)}")
        hz = self.control_hz
        if not (isinstance(hz, (int, float)) and math.isfinite(hz) and 1.0 <= hz <= 500.0):
            raise ConfigError(f"control_hz must be in [1, 500], got {hz!r}")
        if abs(1.0 / (hz * PHYSICS_DT) - self.substeps) > 1e-6:
            raise ConfigError(
                f"control_hz must divide the 500 Hz physics rate (e.g. 10, 20, 50, 100), got {hz}"
            )
        if self.max_episode_steps is not None and not (
            isinstance(self.max_episode_steps, int) and 1 <= self.max_episode_steps <= 100_000
        ):
            raise ConfigError(
                f"max_episode_steps must be an int in [1, 100000], got {self.max_episode_steps!r}"
            )
        if not (isinstance(self.image_size, int) and (self.image_size == 0 or 16 <= self.image_size <= 512)):
            raise ConfigError(
                f"image_size must be 0 (no images) or an int in [16, 512], got {self.image_size!r}"
            )
        cams = tuple(self.cameras)
        bad = [c for c in cams if c not in CAMERAS]
        if bad or not cams:
            raise ConfigError(f"cameras {list(cams)} must be a non-empty subset of {list(CAMERAS)}")
        object.__setattr__(self, "cameras", cams)
        if not (isinstance(self.num_threads, int) and 0 <= self.num_threads <= 64):
            raise ConfigError(f"num_threads must be an int in [0, 64], got {self.num_threads!r}")
        object.__setattr__(self, "randomization", resolve(self.randomization))

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> MujocoConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ConfigError(f"unknown mujoco env option(s) {unknown}; known: {sorted(known)}")
        return cls(**kwargs)
