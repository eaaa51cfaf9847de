"""The ``Robot`` interface every arm implements (in the spirit of LeRobot's ``Robot``).

A handful of methods is the whole contract, so adding an arm means one folder with a config and a
class, without reading the rest of the stack: ``connect`` / ``disconnect`` manage the link,
``get_observation`` returns the latest state as plain numpy values, ``send_action`` hands one
command to the arm *after* the safety layer, and ``features`` describes both so that callers (the
bridge, recorders, policies) can size their buffers without a live robot.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Feature:
    """Shape and dtype of one observation or action entry."""

    shape: tuple[int, ...]
    dtype: str = "float64"
    names: tuple[str, ...] = ()


class Robot(ABC):
    """An arm (or any actuated robot) behind a safety layer."""

    #: Registry name, e.g. ``"franka"`` (``rlinf_robot.robot.registry``: ``make_robot(name, ...)``).
    name: str = "robot"

    @abstractmethod
    def connect(self) -> None:
        """Open the link to the hardware (or simulator) and start reading its state."""

    @abstractmethod
    def disconnect(self) -> None:
        """Stop motion, stop background threads, close the link. Safe to call twice."""

    @property
    @abstractmethod
    def is_connected(self) -> bool: ...

    @abstractmethod
    def get_observation(self) -> dict[str, Any]:
        """The latest state: each key described by ``features()["observation"]``."""

    @abstractmethod
    def send_action(self, action: Any) -> Any:
        """Check ``action`` with the safety layer and, if accepted, execute it.

        Returns the safety layer's verdict (an accepted, resolved action or a rejection); a
        rejected action never moves the arm.
        """

    @abstractmethod
    def features(self) -> dict[str, dict[str, Feature]]:
        """``{"observation": {key: Feature}, "action": {mode: Feature}}``."""

    def __enter__(self) -> Robot:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.disconnect()
