"""``policies.make(name, **cfg)``: name -> policy class, filled by ``@register`` at import time.

Policy modules are imported lazily (on first ``make`` of one of their names), so asking for the MLP
never imports transformers, and ``import policies`` imports nothing heavy at all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from rlinf_robot.errors import ConfigError

_REGISTRY: dict[str, Callable[..., Any]] = {}

#: Where each built-in policy lives; importing the module registers it.
_BUILTIN: dict[str, str] = {
    "mlp": "policies.mlp",
    "tiny_vla": "policies.tiny_vla.policy",
    "hf_vla": "policies.adapters.hf_vla.policy",
    "openpi_remote": "policies.adapters.openpi_remote.policy",
}


def register(name: str):
    """Class decorator: make the policy constructible as ``policies.make(name, ...)``."""

    def deco(cls):
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ConfigError(f"policy {name!r} is registered twice")
        _REGISTRY[name] = cls
        return cls

    return deco


def available() -> list[str]:
    return sorted(set(_REGISTRY) | set(_BUILTIN))


def get(name: str) -> Callable[..., Any]:
    if name not in _REGISTRY and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])
    if name not in _REGISTRY:
        raise ConfigError(f"unknown policy {name!r}; known: {available()}")
    return _REGISTRY[name]


def make(name: str, **cfg: Any):
    """Build policy ``name`` from keyword config (``action_spec=``, ``obs_spec=`` and its own keys)."""
    return get(name)(**cfg)
