"""CPU affinity: which cores each rank pins itself to (``off`` / ``auto`` / explicit per group).

The planner computes ``auto`` cores per bundle (disjoint where the node has enough, shared
round-robin otherwise); a mode here decides what each rank actually gets. A worker applies its cores
with ``pin_to`` at start-up, *before* torch or MuJoCo create thread pools (a thread pool inherits
the creating thread's affinity, so pinning later would leave pool threads unpinned).

Measured on the 2-vCPU dev machine (``benchmarks/pipeline_speedup.py``): pinning gave no reliable
gain, so the default is ``off`` (see the README's scheduler section for numbers).

>>> keys = [("env", 0, 0), ("env", 1, 0), ("rollout", 0, 0)]
>>> assign_cores("auto", keys, [(0,), (1,), (2,)], [4])
([(0,), (1,), (2,)], 'auto')
>>> assign_cores({"env": [[3], [2]], "rollout": "0-1"}, keys, [(0,), (1,), (2,)], [4])
([(3,), (2,), (0, 1)], 'explicit')
>>> assign_cores(False, keys, [(0,), (1,), (2,)], [4])  # YAML reads a bare `off` as False
([(), (), ()], 'off')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlinf_robot.scheduler.errors import PlacementError
from rlinf_robot.scheduler.resources import parse_ranges

RankKey = tuple[str, int, int]  # (group, rank, node)
Cores = tuple[int, ...]
AffinityFn = Callable[[Sequence[RankKey], Sequence[Cores], Sequence[int], Any], list[Cores]]

DEFAULT_AFFINITY = "off"
_MODES: dict[str, AffinityFn] = {}


def register_affinity(name: str) -> Callable[[AffinityFn], AffinityFn]:
    def deco(fn: AffinityFn) -> AffinityFn:
        _MODES[name] = fn
        return fn

    return deco


@register_affinity("off")
def _off(keys, auto, node_cpus, spec) -> list[Cores]:
    return [() for _ in keys]


@register_affinity("auto")
def _auto(keys, auto, node_cpus, spec) -> list[Cores]:
    return [tuple(c) for c in auto]


@register_affinity("explicit")
def _explicit(keys, auto, node_cpus, spec: Mapping[str, Any]) -> list[Cores]:
    groups = {k[0] for k in keys}
    unknown = set(spec) - groups
    if unknown:
        raise PlacementError(f"affinity names unknown group(s) {sorted(unknown)}; groups: {sorted(groups)}")
    out: list[Cores] = []
    for (group, rank, node), default in zip(keys, auto, strict=True):
        if group not in spec:
            out.append(tuple(default))
            continue
        value = spec[group]
        per_rank = (
            isinstance(value, Sequence)
            and not isinstance(value, str)
            and value
            and not isinstance(value[0], int)
        )
        if per_rank:
            if rank >= len(value):
                raise PlacementError(
                    f"affinity.{group} lists cores for {len(value)} ranks, rank {rank} has none"
                )
            value = value[rank]
        cores = parse_ranges(value)
        bad = [c for c in cores if not 0 <= c < node_cpus[node]]
        if bad or not cores:
            raise PlacementError(
                f"affinity.{group}[{rank}]: cores {list(cores)} not in 0-{node_cpus[node] - 1}"
            )
        out.append(cores)
    return out


def affinity_modes() -> list[str]:
    return sorted(_MODES)


def assign_cores(
    affinity: Any, keys: Sequence[RankKey], auto: Sequence[Cores], node_cpus: Sequence[int]
) -> tuple[list[Cores], str]:
    """Resolve ``affinity`` (a mode name, a bool from YAML, or ``{group: cores}``) to cores per rank."""
    if affinity is None:
        affinity = DEFAULT_AFFINITY
    if isinstance(affinity, bool):
        affinity = "auto" if affinity else "off"
    if isinstance(affinity, Mapping):
        return _MODES["explicit"](keys, auto, node_cpus, affinity), "explicit"
    if affinity not in _MODES or affinity == "explicit":
        raise PlacementError(
            f"affinity {affinity!r} unknown; use one of ['auto', 'off'] or a mapping {{group: cores}}"
        )
    return _MODES[affinity](keys, auto, node_cpus, None), affinity


def pin_to(cores: Sequence[int]) -> tuple[int, ...]:
    """Pin the calling process to ``cores`` (no-op for an empty list). Returns the cores now allowed.

    Cores the OS does not offer (a container with fewer CPUs than the plan assumed) are dropped; if
    none is left the process stays unpinned rather than failing.
    """
    allowed = os.sched_getaffinity(0)
    wanted = {c for c in cores if c in allowed}
    if wanted:
        os.sched_setaffinity(0, wanted)
    return tuple(sorted(os.sched_getaffinity(0)))
