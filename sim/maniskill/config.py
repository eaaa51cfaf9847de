"""Options of ``sim.make("maniskill/<task>", num_envs, **options)``, validated at the edge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlinf_robot.envs.spec import ACTION_MODES
from rlinf_robot.errors import ConfigError
from rlinf_robot.settings import check, flag, integer, text

BACKENDS = ("cpu", "gpu")


@dataclass(frozen=True)
class ManiSkillConfig:
    """``backend="cpu"``: N single-env PhysX CPU scenes stepped in turn (state only, runs anywhere);
    ``backend="gpu"``: one PhysX GPU scene holding all N envs (needs CUDA; images possible)."""

    action_mode: str = text("ee_delta", sorted(ACTION_MODES))
    gripper: bool = flag(True)
    max_episode_steps: int | None = integer(None, 1, 100_000, optional=True)  # None: the task's own limit
    image_size: int = 0
    backend: str = text("cpu", BACKENDS)
    terminate_on_success: bool = flag(True)
    seed: int | None = integer(None, optional=True)
    randomization: Any = None  # accepted for a uniform sim.make signature; ManiSkill randomizes itself

    def __post_init__(self):
        check(self, "maniskill env options")
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
