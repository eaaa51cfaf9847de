"""Name -> function registries for advantage estimators and losses.

Configs name an algorithm ("ppo", "grpo", "sac", ...); the learner looks the functions up here instead
of branching on strings. Modules fill the registries with decorators at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rlinf_robot.errors import ConfigError

F = TypeVar("F", bound=Callable)

_REGISTRIES: dict[str, dict[str, Callable]] = {"advantage": {}, "loss": {}, "objective": {}}


def _register(kind: str, name: str) -> Callable[[F], F]:
    def deco(fn: F) -> F:
        table = _REGISTRIES[kind]
        if name in table and table[name] is not fn:
            raise ConfigError(f"{kind} {name!r} is registered twice")
        table[name] = fn
        return fn

    return deco


def register_advantage(name: str) -> Callable[[F], F]:
    """Register an advantage estimator under ``name`` (e.g. ``"gae"``, ``"grpo"``)."""
    return _register("advantage", name)


def register_loss(name: str) -> Callable[[F], F]:
    """Register a loss function under ``name`` (e.g. ``"ppo"``, ``"sac_critic"``)."""
    return _register("loss", name)


def register_objective(name: str) -> Callable[[F], F]:
    """Register ``objective(policy, batch, **cfg) -> (loss, stats)``: a policy's forward pass plus a loss,
    what a learner (``workers.actor.ActorTrainer``) minimises on each micro-batch."""
    return _register("objective", name)


def _lookup(kind: str, name: str) -> Callable:
    table = _REGISTRIES[kind]
    if name not in table:
        raise ConfigError(f"unknown {kind} {name!r}; known: {sorted(table)}")
    return table[name]


def get_advantage(name: str) -> Callable:
    return _lookup("advantage", name)


def get_loss(name: str) -> Callable:
    return _lookup("loss", name)


def get_objective(name: str) -> Callable:
    return _lookup("objective", name)


def get(name: str) -> Callable:
    """The loss registered as ``name``: the usual entry point, ``algorithms.get("ppo")``."""
    return _lookup("loss", name)


def available(kind: str = "loss") -> list[str]:
    if kind not in _REGISTRIES:
        raise ConfigError(f"unknown registry kind {kind!r}; known: {sorted(_REGISTRIES)}")
    return sorted(_REGISTRIES[kind])
