"""Typed configuration of the embedded MuJoCo envs, validated once at construction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlinf_robot.envs.spec import ACTION_MODES
from rlinf_robot.errors import ConfigError
from rlinf_robot.rotations import is_rigid
from rlinf_robot.settings import check, flag, integer, number, text
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

    action_mode: str = text("ee_delta", sorted(ACTION_MODES))
    gripper: bool | None = flag(None, optional=True)
    control_hz: float = number(20.0, 1.0, 500.0)
    max_episode_steps: int | None = integer(None, 1, 100_000, optional=True)
    image_size: int = 0  # 0: state only; else square images of this size (64-128 typical)
    cameras: tuple[str, ...] = CAMERAS
    full_meshes: bool = flag(False)  # render the visual meshes (slow on OSMesa) instead of collision geoms
    num_threads: int = integer(
        0, 0, 64
    )  # physics threads; 0: one per CPU core available, at most 1 per 4 envs
    terminate_on_success: bool = flag(True)
    randomization: DomainRandomization | None = None
    seed: int | None = integer(None, optional=True)
    #: cameras placed where calibration found the real ones: ``{"wrist"|"front": {"pose": 4x4
    #: (OpenCV axes; wrist: in the TCP frame, front: in the base frame), "fovy": degrees}}``
    #: (``calibration.session.camera_poses_from_records``); empty: the scene's own cameras
    camera_poses: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # task-specific options

    @property
    def substeps(self) -> int:
        return round(1.0 / (self.control_hz * PHYSICS_DT))

    def __post_init__(self):
        check(self, "mujoco env options")
        hz = self.control_hz
        if abs(1.0 / (hz * PHYSICS_DT) - self.substeps) > 1e-6:
            raise ConfigError(
                f"control_hz must divide the 500 Hz physics rate (e.g. 10, 20, 50, 100), got {hz}"
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
        object.__setattr__(self, "randomization", resolve(self.randomization))
        object.__setattr__(self, "camera_poses", _camera_poses(self.camera_poses))


def _camera_poses(raw: Any) -> dict[str, dict[str, Any]]:
    """Checked ``camera_poses``: known cameras, a rigid 4x4 pose each, a field of view in (0, 180)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"mujoco env options: camera_poses must map camera names to poses, got {raw!r}")
    out = {}
    for name, placed in raw.items():
        if name not in CAMERAS:
            raise ConfigError(
                f"mujoco env options: camera_poses: unknown camera {name!r}; known: {list(CAMERAS)}"
            )
        try:
            pose = np.asarray(placed["pose"], dtype=np.float64)
        except (TypeError, KeyError, ValueError):
            raise ConfigError(f"mujoco env options: camera_poses.{name} needs a 4x4 'pose'") from None
        if not is_rigid(pose):
            raise ConfigError(f"mujoco env options: camera_poses.{name}.pose must be a rigid 4x4 transform")
        fovy = placed.get("fovy")
        if fovy is not None and not (isinstance(fovy, (int, float)) and 0.0 < fovy < 180.0):
            raise ConfigError(
                f"mujoco env options: camera_poses.{name}.fovy must be in (0, 180) degrees, got {fovy!r}"
            )
        out[name] = {"pose": pose.tolist(), "fovy": None if fovy is None else float(fovy)}
    return out
