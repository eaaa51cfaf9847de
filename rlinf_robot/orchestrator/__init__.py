"""The hybrid training loop: a training job that composes the scheduler's workers (``job``), its
Hydra config (``config``), the source-tagged buffer and real replay (``buffer``), the hybrid PPO
batch (``ppo``), metrics, progress, report. See docs/training.md.

Imports are lazy: ``import rlinf_robot.orchestrator`` loads nothing heavy."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"TrainJob": "job", "JobResult": "job", "TrainConfig": "config", "compose": "config"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
