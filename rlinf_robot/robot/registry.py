"""Robots by name: ``make_robot("franka", robot_ip=...)`` builds a driver from its config.

Adding an arm is one new folder (as in LeRobot): a ``Robot`` subclass with a ``name``, a config
class with ``from_params(dict)`` that validates and raises ``ConfigError``, and one line in
``BUILTIN`` (or ``register_robot`` from a plugin). The registry imports a robot's module only when
that robot is asked for, so naming one never pulls in another's dependencies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.base import Robot

#: name -> the module that registers it when imported
BUILTIN = {"franka": "rlinf_robot.robot.franka.arm"}
_ROBOTS: dict[str, tuple[type[Robot], Any]] = {}


def register_robot(config_cls: Any) -> Callable[[type[Robot]], type[Robot]]:
    """Class decorator: register a ``Robot`` under its ``name`` with the config class that builds it."""

    def add(cls: type[Robot]) -> type[Robot]:
        if cls.name in _ROBOTS and _ROBOTS[cls.name][0] is not cls:
            raise ValueError(f"robot {cls.name!r} is registered twice")
        _ROBOTS[cls.name] = (cls, config_cls)
        return cls

    return add


def robot_names() -> list[str]:
    return sorted(set(BUILTIN) | set(_ROBOTS))


def robot_class(name: str) -> tuple[type[Robot], Any]:
    """The robot class and its config class registered as ``name``."""
    if name not in _ROBOTS and name in BUILTIN:
        importlib.import_module(BUILTIN[name])
    if name not in _ROBOTS:
        raise ConfigError(f"unknown robot {name!r}; known: {robot_names()}")
    return _ROBOTS[name]


def make_robot(name: str, **params: Any) -> Robot:
    """A ``name`` robot configured from ``params`` (unknown or invalid keys: ``ConfigError``),
    not yet connected."""
    cls, config_cls = robot_class(name)
    factory: Callable[[Any], Robot] = cls  # a Robot subclass takes its config (the base has no __init__)
    return factory(config_cls.from_params(params))
