"""The Franka FR3 on franky: ``FrankaArm`` (driver), ``FrankaConfig``, ``FaultStateMachine``, and
``model`` (the arm's facts: joint names, home, TCP, kinematics, IK).

Exports are lazy: importing ``rlinf_robot.robot.franka.model`` (which the safety filter does) must
not pull in the driver, and franky itself is imported only when the arm connects.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ArmObservation": "arm",
    "FrankaArm": "arm",
    "FrankaConfig": "config",
    "ArmState": "faults",
    "FaultStateMachine": "faults",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
