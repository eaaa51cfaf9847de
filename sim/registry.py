"""The env registry: names -> factories, filled by ``@register`` decorators in each simulator package.

Provider modules (``_PROVIDERS``) are imported on the first lookup. They must import with numpy
only: the simulator itself (mujoco, mani_skill, isaaclab, robotwin) is imported inside the factory,
so ``sim.list()`` works on any machine and ``sim.make`` of an absent simulator raises
``MissingDependency`` with the install command instead of an ImportError from deep inside.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

from rlinf_robot.errors import ConfigError, MissingDependency

_PROVIDERS = ("sim.mujoco.tasks", "sim.maniskill.tasks", "sim.isaaclab.tasks", "sim.robotwin.tasks")


@dataclass(frozen=True)
class EnvEntry:
    """One registered env: how to build it and what it needs."""

    name: str
    factory: Callable
    description: str = ""
    requires: tuple[str, ...] = ()  # importable module names the factory needs
    extra: str | None = None  # pyproject extra that installs them
    device: str = "cpu"  # "cpu": runs here; "gpu": needs an accelerator
    hint: str | None = None  # install command when no pip extra covers it

    def missing(self) -> list[str]:
        return [mod for mod in self.requires if importlib.util.find_spec(mod) is None]

    def available(self) -> bool:
        return not self.missing()


_REGISTRY: dict[str, EnvEntry] = {}
_loaded = False


def register(
    name: str,
    *,
    description: str = "",
    requires: tuple[str, ...] = (),
    extra: str | None = None,
    device: str = "cpu",
    hint: str | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator: ``@register("mujoco/fr3-reach", requires=("mujoco",), extra="sim")``.

    The decorated callable is called as ``factory(num_envs=N, **cfg)`` and returns a ``BatchedEnv``.
    """
    if "/" not in name:
        raise ValueError(f"env names are '<simulator>/<task>', got {name!r}")
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")

    def deco(factory: Callable) -> Callable:
        if name in _REGISTRY and _REGISTRY[name].factory is not factory:
            raise ValueError(f"env {name!r} is already registered")
        _REGISTRY[name] = EnvEntry(name, factory, description, tuple(requires), extra, device, hint)
        return factory

    return deco


def _load_providers() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in _PROVIDERS:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:  # a provider package not in this checkout: skip it,
            if exc.name is None or not mod.startswith(exc.name):  # but never hide a broken import
                raise


def names(*, device: str | None = None, available_only: bool = False) -> list[str]:
    """Registered env names, sorted; optionally only ``device`` ("cpu"/"gpu") or installed ones."""
    _load_providers()
    return sorted(
        n
        for n, e in _REGISTRY.items()
        if (device is None or e.device == device) and (not available_only or e.available())
    )


def spec(name: str) -> EnvEntry:
    """The registry entry of ``name``; an unknown name raises ConfigError listing the known ones."""
    _load_providers()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown env {name!r}; known envs: {', '.join(names())}") from None


def make(name: str, num_envs: int = 1, **cfg):
    """Build ``num_envs`` batched copies of env ``name``. ``cfg`` goes to the env's config."""
    entry = spec(name)
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    missing = entry.missing()
    if missing:
        raise MissingDependency(missing[0], extra=entry.extra, hint=entry.hint)
    return entry.factory(num_envs=num_envs, **cfg)
