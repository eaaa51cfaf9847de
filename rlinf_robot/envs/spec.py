"""The environment contract shared by every simulator and the real arm.

Batched and numpy in / numpy out, so a policy trained in sim runs on the arm unchanged:

- ``reset(seed=None) -> obs``
- ``step(actions[N, A]) -> obs, reward[N], terminated[N], truncated[N], info``
- ``chunk_step(actions[N, H, A])`` executes an action chunk (H steps at the control rate)
- ``obs = {"state": float32[N, S], "images": {cam: uint8[N, H, W, 3]}, "instruction": list[str]}``

Action modes are shared with the franka node: ``joint_delta`` (7) and ``ee_delta`` (6: dxyz +
rotation vector), each optionally followed by one gripper-width column.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Per-mode base width of an action, without the optional gripper column.
ACTION_MODES: dict[str, int] = {"joint_delta": 7, "ee_delta": 6}

#: The robot part of ``obs["state"]``, first in every env (sim and real) so a policy reads the arm
#: the same way everywhere: joint positions (rad), joint velocities (rad/s), TCP position (m, base
#: frame), TCP orientation (quaternion w x y z, sign chosen so q . (0, 1, 0, 0) >= 0, i.e. continuous
#: around the gripper-down pose), finger opening (m). Task columns (goal, object pose) follow.
ROBOT_STATE_FIELDS: tuple[tuple[str, int], ...] = (
    ("joint_pos", 7),
    ("joint_vel", 7),
    ("tcp_pos", 3),
    ("tcp_quat", 4),
    ("gripper_width", 1),
)


@dataclass(frozen=True)
class ActionSpec:
    """What one env's action means. ``low``/``high`` are float32 arrays of ``shape``."""

    mode: str
    shape: tuple[int, ...]
    low: np.ndarray
    high: np.ndarray
    control_hz: float
    gripper: bool = False

    def __post_init__(self):
        if self.mode not in ACTION_MODES:
            raise ValueError(f"action mode {self.mode!r} not in {sorted(ACTION_MODES)}")
        width = ACTION_MODES[self.mode] + int(self.gripper)
        if self.shape != (width,):
            raise ValueError(f"{self.mode} (gripper={self.gripper}) needs shape ({width},), got {self.shape}")
        for name in ("low", "high"):
            arr = getattr(self, name)
            if arr.shape != self.shape or arr.dtype != np.float32:
                raise ValueError(f"{name} must be float32 of shape {self.shape}")
        if not self.control_hz > 0:
            raise ValueError("control_hz must be positive")

    def clip(self, actions: np.ndarray) -> np.ndarray:
        return np.clip(actions, self.low, self.high).astype(np.float32, copy=False)


@dataclass(frozen=True)
class ObsSpec:
    """Shapes (per env, without the batch dimension) and dtypes of each observation key."""

    state_shape: tuple[int, ...]
    images: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # cam -> (H, W, 3)
    #: Optional names and widths of the state columns, in order (e.g. ROBOT_STATE_FIELDS + task's).
    state_fields: tuple[tuple[str, int], ...] = ()

    def __post_init__(self):
        if self.state_fields:
            width = sum(w for _, w in self.state_fields)
            if self.state_shape != (width,):
                raise ValueError(f"state_fields add up to ({width},), state_shape is {self.state_shape}")

    def state_slices(self) -> dict[str, slice]:
        """Column slice of each named state field (empty when the env does not name them)."""
        out, start = {}, 0
        for name, width in self.state_fields:
            out[name] = slice(start, start + width)
            start += width
        return out

    def shapes(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        out = {"state": (self.state_shape, np.dtype(np.float32))}
        for cam, hwc in self.images.items():
            out[f"images/{cam}"] = (hwc, np.dtype(np.uint8))
        return out


Obs = dict[str, Any]


class BatchedEnv(abc.ABC):
    """Base class of sim and real envs. Subclasses implement ``reset`` and ``step``."""

    num_envs: int
    action_spec: ActionSpec
    obs_spec: ObsSpec

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> Obs: ...

    @abc.abstractmethod
    def step(self, actions: np.ndarray) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict]: ...

    def chunk_step(self, actions: np.ndarray) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Execute ``actions[N, H, A]``: H steps; rewards summed, done flags OR-ed.

        An env that finishes mid-chunk ignores the rest of its chunk (auto-reset envs reset at the
        step that finished). Subclasses with a native chunk executor (the real arm) override this.
        """
        actions = np.asarray(actions)
        if actions.ndim != 3 or actions.shape[0] != self.num_envs:
            raise ValueError(f"chunk_step needs actions [N={self.num_envs}, H, A], got {actions.shape}")
        total = np.zeros(self.num_envs, np.float32)
        term = np.zeros(self.num_envs, bool)
        trunc = np.zeros(self.num_envs, bool)
        infos: list[dict] = []
        obs: Obs = {}
        for h in range(actions.shape[1]):
            obs, r, te, tr, info = self.step(actions[:, h])
            live = ~(term | trunc)
            total += np.where(live, r, 0.0).astype(np.float32)
            term |= te & live
            trunc |= tr & live
            infos.append(info)
        return obs, total, term, trunc, {"steps": infos}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release simulator / network resources."""
