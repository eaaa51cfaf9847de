"""Typed errors of the scheduler: what went wrong is in the type, who and where in the message."""

from __future__ import annotations

from rlinf_robot.errors import ConfigError, RlinfRobotError


class SchedulerError(RlinfRobotError):
    """Base class of scheduler failures at run time."""


class PlacementError(ConfigError):
    """A placement cannot be made: more accelerators asked than exist, overlaps, bad group specs."""


class WorkerError(SchedulerError):
    """A worker method raised. Names the group, the rank and the method; the remote traceback follows."""

    def __init__(self, group: str, rank: int, method: str, detail: str):
        self.group, self.rank, self.method = group, rank, method
        super().__init__(f"worker {group}[{rank}].{method}() failed:\n{detail}")


class WorkerCrashed(WorkerError):
    """A worker process died (segfault, os._exit, OOM kill) while running or before a call."""


class WorkerTimeout(SchedulerError, TimeoutError):
    """A call on a worker group did not finish within its timeout."""


class ChannelTimeout(SchedulerError, TimeoutError):
    """A channel put (queue full) or get (queue empty) did not complete within its timeout."""


class ChannelClosed(SchedulerError):
    """The channel was closed or its actor died."""
