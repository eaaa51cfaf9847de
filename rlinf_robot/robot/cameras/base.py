"""The ``Camera`` interface and its registry (name -> class), looked up from configuration."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from rlinf_robot.errors import ConfigError

#: kind -> "module:Class", imported on first use so a robot PC without MuJoCo can use ``opencv``.
CAMERAS: dict[str, str] = {
    "sim": "rlinf_robot.robot.cameras.mujoco_arm:MujocoArmCamera",
    "opencv": "rlinf_robot.robot.cameras.opencv:OpenCVCamera",
}


class Camera(ABC):
    #: Whether ``read`` needs the arm's joint positions (a simulated view of the arm).
    needs_joint_positions: bool = False

    @abstractmethod
    def open(self) -> None: ...

    @abstractmethod
    def read(self, joint_positions: np.ndarray | None = None) -> np.ndarray:
        """One RGB frame, ``uint8[H, W, 3]``."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Camera:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def register_camera(kind: str, target: str) -> None:
    CAMERAS[kind] = target


def make_camera(kind: str, **params: Any) -> Camera:
    if kind not in CAMERAS:
        raise ConfigError(f"camera mode {kind!r} unknown; known: {sorted(CAMERAS)}")
    module, cls = CAMERAS[kind].split(":")
    return getattr(importlib.import_module(module), cls)(**params)
