"""One way to declare and check settings: each dataclass field carries its rule.

Every settings dataclass of the project (the Franka driver, the bridge, the simulators, the job's
algorithms) declares its limits next to its defaults and is checked by the same two functions, so
a bad value always reads ``<source>: <key> must be <rule>, got <value>`` and an unknown key is
named beside the known ones::

    @dataclass(frozen=True)
    class ServerConfig:
        deadman_ms: float = number(100.0, lo=0.0, hi=10_000.0, lo_open=True)
        send_hwm: int = integer(64, lo=1, hi=100_000)

        def __post_init__(self):
            check(self, "bridge server config")  # then the rules that span several fields

    ServerConfig.from_dict = classmethod(lambda cls, raw: build(cls, raw, "bridge server config"))

Light on purpose (the robot PC imports it): the standard library and ``rlinf_robot.errors`` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from rlinf_robot.errors import ConfigError

T = TypeVar("T")


@dataclass(frozen=True)
class Rule:
    """What one field accepts. ``kind``: number, integer, flag, text or numbers (a fixed-length
    sequence of finite numbers)."""

    kind: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    choices: tuple[str, ...] = ()
    length: int | None = None
    optional: bool = False  # None is allowed

    def describe(self) -> str:
        what = {
            "number": "a number",
            "integer": "an integer",
            "flag": "true or false",
            "text": "a string",
            "numbers": f"{self.length} finite numbers",
        }[self.kind]
        if self.choices:
            what = f"one of {list(self.choices)}"
        if self.lo is not None and self.hi is not None:
            what += f" in {'(' if self.lo_open else '['}{self.lo}, {self.hi}]"
        elif self.lo is not None:
            what += f" {'>' if self.lo_open else '>='} {self.lo}"
        elif self.hi is not None:
            what += f" <= {self.hi}"
        return what + (" (or null)" if self.optional else "")

    def accepts(self, v: Any) -> bool:
        if v is None:
            return self.optional
        if self.kind == "flag":
            return isinstance(v, bool)
        if self.kind == "text":
            return isinstance(v, str) and (not self.choices or v in self.choices)
        if self.kind == "numbers":
            return (
                isinstance(v, Sequence)
                and not isinstance(v, str)
                and len(v) == self.length
                and all(_is_number(x) and math.isfinite(x) for x in v)
            )
        if not _is_number(v) or (self.kind == "integer" and not isinstance(v, int)) or not math.isfinite(v):
            return False
        if self.lo is not None and not (v > self.lo if self.lo_open else v >= self.lo):
            return False
        return self.hi is None or v <= self.hi


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _field(default: Any, rule: Rule) -> Any:
    return field(default=default, metadata={"rule": rule})


def number(
    default: Any,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    optional: bool = False,
) -> Any:
    """A finite real number, optionally within [lo, hi] (``lo_open``: (lo, hi])."""
    return _field(default, Rule("number", lo, hi, lo_open, optional=optional))


def integer(default: Any, lo: int | None = None, hi: int | None = None, *, optional: bool = False) -> Any:
    return _field(default, Rule("integer", lo, hi, optional=optional))


def flag(default: bool | None, *, optional: bool = False) -> Any:
    return _field(default, Rule("flag", optional=optional))


def text(default: Any, choices: Sequence[str] = (), *, optional: bool = False) -> Any:
    return _field(default, Rule("text", choices=tuple(choices), optional=optional))


def numbers(default: tuple[float, ...], length: int) -> Any:
    """A fixed-length sequence of finite numbers (give the default as a tuple)."""
    return _field(default, Rule("numbers", length=length))


def check(obj: Any, source: str) -> None:
    """Every field's rule; the first broken one raises ``ConfigError`` naming ``source`` and the key."""
    for f in fields(obj):
        rule = f.metadata.get("rule")
        if rule is not None:
            value = getattr(obj, f.name)
            if not rule.accepts(value):
                raise ConfigError(f"{source}: {f.name} must be {rule.describe()}, got {value!r}")


def build(cls: type[T], raw: Mapping[str, Any], source: str) -> T:
    """``cls(**raw)``: unknown keys, missing or mistyped arguments are a ``ConfigError`` naming
    ``source`` (the known keys listed beside unknown ones)."""
    known = {f.name for f in fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {unknown}; known: {sorted(known)}")
    try:
        return cls(**raw)
    except TypeError as e:
        raise ConfigError(f"{source}: {e}") from None
