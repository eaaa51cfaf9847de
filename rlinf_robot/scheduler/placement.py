"""Placement: pure functions from a resource spec + group specs to a ``Plan`` of bundles.

Why pure: the same planner runs on a 2-core laptop with logical GPUs and on a 64-GPU cluster,
so it can be doctested and reviewed without starting Ray. ``cluster.py`` turns a plan into one Ray
placement group (one bundle per accelerator set or CPU-only rank) and ``WorkerGroup`` puts each
rank into its bundle; each rank's ``CUDA_VISIBLE_DEVICES`` is then its planned accelerators (the
``gpus`` column), not whichever ones Ray picked for the bundle.

Every strategy reduces to *share sets*: groups in one set share the same accelerators (time-sliced,
with offload), different sets get disjoint accelerators.

- ``collocated``: one set holding every group.
- ``disaggregated``: each group is its own set.
- ``hybrid``: the sets are given, e.g. ``share=[["env", "rollout"]]``; unlisted groups stand alone.

CPU-only groups in a set run on the nodes of that set's accelerators; elsewhere they are spread over
nodes in blocks. CPU cores are handed out per bundle on each node (see ``affinity.py`` for how a
worker pins itself to them); when more cores are asked than a node has, cores are shared and each
bundle's Ray CPU amount shrinks proportionally, so a plan always fits the cluster.

>>> spec = ResourceSpec.uniform(num_nodes=1, gpus_per_node=2, cpus_per_node=4)
>>> groups = [GroupSpec("actor", 2, gpus_per_rank=1), GroupSpec("rollout", 2, gpus_per_rank=1),
...           GroupSpec("env", 2)]
>>> print(make_plan("collocated", spec, groups, affinity="auto").describe())
collocated plan: 1 node(s), 2 accelerator(s), 4 bundle(s), affinity=auto
group    rank  node  gpus  gpu_share  cores  cpu_share  bundle
actor    0     0     0     0.5        0      0.5        0
actor    1     0     1     0.5        1      0.5        1
rollout  0     0     0     0.5        0      0.5        0
rollout  1     0     1     0.5        1      0.5        1
env      0     0     -     0          2      1.0        2
env      1     0     -     0          3      1.0        3
>>> plan = make_plan("disaggregated", spec, groups)
Traceback (most recent call last):
...
rlinf_robot.scheduler.errors.PlacementError: disaggregated: group(s) ['rollout'] ask 2 accelerator(s) but only 0 of 2 are free
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rlinf_robot.scheduler.errors import PlacementError
from rlinf_robot.scheduler.plan import Bundle, Plan, RankPlacement, build_plan
from rlinf_robot.scheduler.resources import GroupSpec, ResourceSpec

__all__ = [
    "Bundle",
    "GroupSpec",
    "Plan",
    "RankPlacement",
    "ResourceSpec",
    "collocated",
    "disaggregated",
    "hybrid",
    "make_plan",
    "placement_modes",
    "register_placement",
]


# ---------------------------------------------------------------- the registry of strategies
Strategy = Callable[..., Plan]
_STRATEGIES: dict[str, Strategy] = {}


def register_placement(name: str) -> Callable[[Strategy], Strategy]:
    def deco(fn: Strategy) -> Strategy:
        _STRATEGIES[name] = fn
        return fn

    return deco


def placement_modes() -> list[str]:
    return sorted(_STRATEGIES)


def make_plan(mode: str, resources: ResourceSpec, groups: Sequence[GroupSpec], **options: Any) -> Plan:
    """Look ``mode`` up in the registry and plan. Unknown mode -> error listing the known ones."""
    try:
        strategy = _STRATEGIES[mode]
    except KeyError:
        raise PlacementError(f"placement mode {mode!r} unknown; known: {placement_modes()}") from None
    return strategy(resources, groups, **options)


@register_placement("collocated")
def collocated(resources: ResourceSpec, groups: Sequence[GroupSpec], affinity: Any = None) -> Plan:
    """All groups share the same accelerators (time-sliced; idle groups offload).

    >>> spec = ResourceSpec.uniform(num_nodes=8, gpus_per_node=8, cpus_per_node=64)
    >>> plan = collocated(spec, [GroupSpec("actor", 64, 1), GroupSpec("rollout", 64, 1)])
    >>> plan.devices("actor") == plan.devices("rollout"), len(plan.bundles), plan.group("rollout")[9].node
    (True, 64, 1)
    """
    return build_plan("collocated", resources, groups, [[g.name for g in groups]], affinity)


@register_placement("disaggregated")
def disaggregated(resources: ResourceSpec, groups: Sequence[GroupSpec], affinity: Any = None) -> Plan:
    """Each group on its own accelerators; overlapping explicit ``devices`` are an error.

    >>> spec = ResourceSpec.uniform(num_nodes=8, gpus_per_node=8, cpus_per_node=64)
    >>> plan = disaggregated(spec, [GroupSpec("actor", 32, 1), GroupSpec("rollout", 16, 2)])
    >>> plan.devices("actor")[-1], plan.devices("rollout")[0], plan.group("rollout")[0].node
    ((31,), (32, 33), 4)
    >>> disaggregated(spec, [GroupSpec("a", 2, 1, devices=(0, 1)), GroupSpec("b", 2, 1, devices=(1, 2))])
    Traceback (most recent call last):
    ...
    rlinf_robot.scheduler.errors.PlacementError: disaggregated: groups ['b'] and ['a'] overlap on accelerator(s) [1]
    """
    return build_plan("disaggregated", resources, groups, [[g.name] for g in groups], affinity)


@register_placement("hybrid")
def hybrid(
    resources: ResourceSpec,
    groups: Sequence[GroupSpec],
    share: Sequence[Sequence[str]] = (),
    affinity: Any = None,
) -> Plan:
    """Groups listed together in ``share`` share accelerators; sets are disjoint from each other.

    >>> spec = ResourceSpec.uniform(num_nodes=1, gpus_per_node=2, cpus_per_node=2)
    >>> groups = [GroupSpec("env", 1), GroupSpec("rollout", 1, 1), GroupSpec("actor", 1, 1)]
    >>> plan = hybrid(spec, groups, share=[["env", "rollout"]])
    >>> plan.devices("rollout"), plan.devices("actor"), plan.group("env")[0].node
    ([(0,)], [(1,)], 0)
    """
    named = {g.name for g in groups}
    seen: set[str] = set()
    sets: list[list[str]] = []
    for members in share:
        members = list(members)
        bad = [m for m in members if m not in named]
        if bad:
            raise PlacementError(f"hybrid.share names unknown group(s) {bad}; groups: {sorted(named)}")
        dup = [m for m in members if m in seen]
        if dup:
            raise PlacementError(f"hybrid.share lists group(s) {dup} in more than one set")
        seen.update(members)
        sets.append(members)
    sets += [[g.name] for g in groups if g.name not in seen]
    order = [g.name for g in groups]
    sets.sort(key=lambda members: min(order.index(m) for m in members))  # allocate in listed order
    return build_plan("hybrid", resources, groups, sets, affinity)
