"""Options of ``sim.make("maniskill/<task>", num_envs, **options)``, validated at the edge."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from rlinf_robot.envs.spec import ACTION_MODES
from rlinf_robot.errors import ConfigError

BACKENDS = ("cpu", "gpu")


@dataclass(frozen=True)
class ManiSkillConfig:
    """``backend="cpu"``: N single-env PhysX CPU scenes stepped in turn (state only, runs anywhere);
    ``backend="gpu"``: one PhysX GPU scene holding all N envs (needs CUDA; images possible)."""

    action_mode: str = "ee_delta"
    gripper: bool = True
    max_episode_steps: int | None = None  # None: the task's own limit (ManiSkill registry)
    image_size: int = 0
    backend: str = "cpu"
    terminate_on_success: bool = True
    seed: int | None = None
    randomization: Any = None  # accepted for a uniform sim.make signature; ManiSkill randomizes itself

    def __post_init__(self):
        if self.action_mode not in ACTION_MODES:
            raise ConfigError(f"action_mode {self.action_mode!r} not in {sorted(ACTION_MODES)}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend {self.backend!r} not in {list(BACKENDS)}")
        if self.max_episode_steps is not None and not (
            isinstance(self.max_episode_steps, int) and 1 <= self.max_episode_steps <= 100_000
        ):
            raise ConfigError(
                f"max_episode_steps must be an int in [1, 100000], got {self.max_episode_steps!r}"
            )
        if not (isinstance(self.image_size, int) and (self.image_size == 0 or 16 <= self.image_size <= 512)):
            raise ConfigError(f"image_size must be 0 or an int in [16, 512], got {self.image_size!r}")
        if self.image_size and self.backend == "cpu":
            raise ConfigError(
                "image_size: ManiSkill RGB observations need a GPU render device (backend='gpu')"
            )
        if self.randomization not in (None, False):
            raise ConfigError(
                "randomization: not supported by the ManiSkill adapter (use its own task randomization)"
            )

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ManiSkillConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ConfigError(f"unknown maniskill env option(s) {unknown}; known: {sorted(known)}")
        return cls(**kwargs)
