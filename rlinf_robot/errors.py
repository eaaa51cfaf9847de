"""Typed errors shared by the robot side and the learner side.

The robot side never hides a fault: each kind of failure has its own type so callers can decide
what to do (hold, recover, latch) without parsing messages.
"""

from __future__ import annotations


class RlinfRobotError(Exception):
    """Base class of every error this project raises on purpose."""


class MissingDependency(RlinfRobotError, ImportError):
    """An optional dependency is not installed; the message carries the install command."""

    def __init__(self, package: str, extra: str | None = None, hint: str | None = None):
        self.package = package
        self.extra = extra
        how = hint or (f"pip install 'rlinf-robot[{extra}]'" if extra else f"pip install {package}")
        super().__init__(f"{package} is not installed; install it with: {how}")


class ConfigError(RlinfRobotError, ValueError):
    """A configuration value is missing or out of its allowed range; names the key."""


class SafetyViolation(RlinfRobotError):
    """A command was refused by the safety layer."""


class Latched(RlinfRobotError):
    """The e-stop or the fault state machine is latched; only an explicit reset clears it."""


class LinkLost(RlinfRobotError):
    """The link to the learner or to the arm went quiet for longer than its deadline."""


class ReflexError(RlinfRobotError):
    """The arm stopped on a reflex / control error (libfranka ControlException)."""


class RobotUnreachable(RlinfRobotError, ConnectionError):
    """A training job's robot endpoint did not answer before the job started anything."""
