"""The scheduler: workers on Ray with collocated / disaggregated / hybrid placement.

- ``Cluster`` starts or joins Ray (loopback-only when local) and reserves a placement ``Plan``.
- ``make_plan(mode, resources, groups)`` — pure planning, a registry of strategies (placement.py).
- ``Worker`` / ``WorkerGroup`` — ranks of a worker class as Ray actors (worker.py, worker_group.py).
- ``Channel`` — bounded, weighted, named queues between groups (channel.py).
- weight sync (weight_sync.py), offload / onload (offload.py), pipelined rollouts (pipeline.py) and a
  Chrome-trace timeline (timeline.py).

Imports are lazy: ``import rlinf_robot.scheduler`` does not import Ray or torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Cluster": "cluster",
    "ClusterConfig": "cluster",
    "Reservation": "cluster",
    "Worker": "worker",
    "WorkerInfo": "worker",
    "WorkerGroup": "worker_group",
    "GroupResult": "worker_group",
    "Plan": "plan",
    "Bundle": "plan",
    "RankPlacement": "plan",
    "make_plan": "placement",
    "placement_modes": "placement",
    "register_placement": "placement",
    "ResourceSpec": "resources",
    "NodeSpec": "resources",
    "GroupSpec": "resources",
    "Channel": "channel",
    "Timeline": "timeline",
    "to_chrome_trace": "timeline",
    "write_chrome_trace": "timeline",
    "SchedulerConfig": "config",
    "Scheduler": "config",
    "PlacementError": "errors",
    "WorkerError": "errors",
    "WorkerCrashed": "errors",
    "WorkerTimeout": "errors",
    "ChannelTimeout": "errors",
    "ChannelClosed": "errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlinf_robot.scheduler' has no attribute {name!r}")
    return getattr(importlib.import_module(f"rlinf_robot.scheduler.{module}"), name)
