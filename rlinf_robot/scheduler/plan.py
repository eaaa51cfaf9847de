"""The plan data (``Plan``, ``Bundle``, ``RankPlacement``) and the planner behind every strategy.

``build_plan`` takes *share sets* (groups in one set share accelerators, sets are disjoint) and
turns them into bundles: accelerators first (explicit ``devices``, then the lowest free ones; never
ones the resources mark busy), ranks onto the nodes of their accelerators, one bundle per distinct
accelerator set or CPU-only rank, and CPU cores / Ray CPU amounts shrunk to fit each node. The strategies in ``placement.py`` only decide
the share sets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlinf_robot.scheduler.affinity import assign_cores
from rlinf_robot.scheduler.errors import PlacementError
from rlinf_robot.scheduler.resources import GroupSpec, ResourceSpec


def _floor4(x: float) -> float:
    """Ray keeps resources in 1e-4 units; round down so shares never sum past a bundle."""
    return math.floor(x * 10_000 + 1e-9) / 10_000


@dataclass(frozen=True)
class Bundle:
    """One Ray placement-group bundle: accelerators ``gpus`` (node-local) on ``node``, ``num_cpus``."""

    node: int
    gpus: tuple[int, ...]
    num_cpus: float
    cores: tuple[int, ...]

    def resources(self, node_address: str = "") -> dict[str, float]:
        """Ray resource dict; ``node_address`` pins the bundle to that node (multi-node clusters)."""
        res: dict[str, float] = {"CPU": self.num_cpus}
        if self.gpus:
            res["GPU"] = float(len(self.gpus))
        if node_address:
            res[f"node:{node_address}"] = 0.001
        return res


@dataclass(frozen=True)
class RankPlacement:
    """Where one rank runs. ``gpus``/``cores`` are node-local; shares are what it asks Ray for.
    ``gpus`` are also the rank's ``CUDA_VISIBLE_DEVICES`` (set by the worker bootstrap)."""

    group: str
    rank: int
    node: int
    gpus: tuple[int, ...]
    global_gpus: tuple[int, ...]
    cores: tuple[int, ...]
    bundle: int
    gpu_share: float
    cpu_share: float
    threads: int = 1


@dataclass(frozen=True)
class Plan:
    mode: str
    resources: ResourceSpec
    bundles: tuple[Bundle, ...]
    ranks: tuple[RankPlacement, ...]
    affinity: str

    def group(self, name: str) -> list[RankPlacement]:
        ranks = [r for r in self.ranks if r.group == name]
        if not ranks:
            raise PlacementError(f"no group {name!r} in plan; groups: {self.group_names()}")
        return ranks

    def group_names(self) -> list[str]:
        return list(dict.fromkeys(r.group for r in self.ranks))

    def devices(self, name: str) -> list[tuple[int, ...]]:
        """Global accelerator indices of each rank of group ``name``."""
        return [r.global_gpus for r in self.group(name)]

    def describe(self) -> str:
        """The plan as a table: one line per rank (also logged when a cluster launches it)."""
        head = (
            f"{self.mode} plan: {len(self.resources.nodes)} node(s), {self.resources.total_gpus} "
            f"accelerator(s), {len(self.bundles)} bundle(s), affinity={self.affinity}"
        )
        rows = [("group", "rank", "node", "gpus", "gpu_share", "cores", "cpu_share", "bundle")]
        for r in self.ranks:
            rows.append(
                (
                    r.group,
                    str(r.rank),
                    str(r.node),
                    _fmt(r.gpus),
                    f"{r.gpu_share:g}",
                    _fmt(r.cores),
                    f"{r.cpu_share:g}" if r.cpu_share % 1 else f"{r.cpu_share:.1f}",
                    str(r.bundle),
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
        return "\n".join([head, *lines])


def _fmt(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids)) if ids else "-"


def build_plan(
    mode: str, res: ResourceSpec, groups: Sequence[GroupSpec], sets: list[list[str]], affinity: Any
) -> Plan:
    by_name = {g.name: g for g in groups}
    if len(by_name) != len(groups):
        raise PlacementError(f"{mode}: group names must be unique, got {[g.name for g in groups]}")
    set_devices = _allocate(mode, res, by_name, sets)

    # Rank -> (node, node-local gpus, global gpus)
    located: list[tuple[GroupSpec, int, int, tuple[int, ...], tuple[int, ...]]] = []
    for members, devs in zip(sets, set_devices, strict=True):
        for name in members:
            g = by_name[name]
            for r in range(g.num_ranks):
                if g.gpus_per_rank:
                    mine = devs[r * g.gpus_per_rank : (r + 1) * g.gpus_per_rank]
                    where = {res.gpu_location(d)[0] for d in mine}
                    if len(where) != 1:
                        raise PlacementError(
                            f"{mode}: {name}[{r}] would span nodes {sorted(where)} "
                            f"(accelerators {list(mine)}); use gpus_per_rank <= node size"
                        )
                    node = where.pop()
                    local = tuple(res.gpu_location(d)[1] for d in mine)
                    located.append((g, r, node, local, tuple(mine)))
                else:
                    if devs:
                        node = res.gpu_location(devs[r * len(devs) // g.num_ranks])[0]
                    else:
                        node = r * len(res.nodes) // g.num_ranks
                    located.append((g, r, node, (), ()))
    located.sort(key=lambda x: ([g.name for g in groups].index(x[0].name), x[1]))

    # Bundles: one per distinct accelerator set (shared by collocated ranks), one per CPU-only rank.
    bundle_of: dict[tuple[int, tuple[int, ...]], int] = {}
    members_of: list[list[int]] = []
    bundle_node: list[int] = []
    bundle_gpus: list[tuple[int, ...]] = []
    rank_bundle: list[int] = []
    for i, (_, _, node, local, _) in enumerate(located):
        key = (node, local)
        if local and key in bundle_of:
            b = bundle_of[key]
        else:
            b = len(members_of)
            members_of.append([])
            bundle_node.append(node)
            bundle_gpus.append(local)
            if local:
                bundle_of[key] = b
        members_of[b].append(i)
        rank_bundle.append(b)
    _check_overlaps(mode, located, bundle_of)

    # CPU: each bundle wants the max cores of its (time-sliced) members; shrink to fit the node.
    demand = [max(located[i][0].cpus_per_rank for i in m) for m in members_of]
    bundle_cores: list[tuple[int, ...]] = [()] * len(members_of)
    bundle_cpus: list[float] = [0.0] * len(members_of)
    for n, node in enumerate(res.nodes):
        mine = [b for b in range(len(members_of)) if bundle_node[b] == n]
        total = sum(demand[b] for b in mine)
        budget = node.num_cpus if node.cpu_budget is None else min(node.cpu_budget, node.num_cpus)
        scale = min(1.0, budget / total) if total else 1.0
        start = 0
        for b in mine:
            bundle_cores[b] = tuple((start + k) % node.num_cpus for k in range(min(demand[b], node.num_cpus)))
            start += demand[b]
            bundle_cpus[b] = max(_floor4(demand[b] * scale), 0.0001)

    bundles = tuple(
        Bundle(bundle_node[b], bundle_gpus[b], bundle_cpus[b], bundle_cores[b])
        for b in range(len(members_of))
    )
    auto_cores = [bundle_cores[rank_bundle[i]] for i in range(len(located))]
    cores, affinity_name = assign_cores(
        affinity,
        [(g.name, r, node) for g, r, node, _, _ in located],
        auto_cores,
        [n.num_cpus for n in res.nodes],
    )
    ranks = []
    for i, (g, r, node, local, glob) in enumerate(located):
        sharers = len(members_of[rank_bundle[i]])
        if len(local) > 1 and sharers > 1:
            raise PlacementError(
                f"{mode}: {g.name}[{r}] holds {len(local)} accelerators shared with other "
                "ranks; Ray can share only single accelerators (use gpus_per_rank=1)"
            )
        gpu_share = float(len(local)) if sharers == 1 else _floor4(1.0 / sharers)
        cpu_share = max(_floor4(bundle_cpus[rank_bundle[i]] / sharers), 0.0001)
        ranks.append(
            RankPlacement(
                g.name,
                r,
                node,
                local,
                glob,
                cores[i],
                rank_bundle[i],
                gpu_share if local else 0.0,
                cpu_share,
                g.cpus_per_rank,
            )
        )
    return Plan(mode, res, bundles, tuple(ranks), affinity_name)


def _allocate(
    mode: str, res: ResourceSpec, by_name: Mapping[str, GroupSpec], sets: list[list[str]]
) -> list[tuple[int, ...]]:
    """Accelerators of each share set: explicit ``devices`` first, then the lowest free ones.
    Accelerators the resources mark busy (held by groups already running) are never handed out."""
    total = res.total_gpus
    out: list[tuple[int, ...] | None] = [None] * len(sets)
    busy = set(res.busy_gpus)
    owner: dict[int, list[str]] = {}
    for s, members in enumerate(sets):
        explicit = {by_name[m].devices for m in members if by_name[m].devices is not None}
        if len(explicit) > 1:
            raise PlacementError(f"{mode}: groups {members} share accelerators but list different devices")
        if explicit:
            devs = explicit.pop()
            bad = [d for d in devs if not 0 <= d < total]
            if bad:
                raise PlacementError(
                    f"{mode}: group(s) {members} ask accelerator(s) {bad}; the cluster "
                    f"has {total} (0-{total - 1})"
                )
            need = max(by_name[m].num_gpus for m in members)
            if len(devs) < need:
                raise PlacementError(
                    f"{mode}: group(s) {members} need {need} accelerators, devices lists {len(devs)}"
                )
            held = sorted(d for d in devs if d in busy)
            if held:
                raise PlacementError(
                    f"{mode}: group(s) {members} ask accelerator(s) {held}, held by groups already running"
                )
            clash = sorted(d for d in devs if d in owner)
            if clash:
                raise PlacementError(
                    f"{mode}: groups {members} and {owner[clash[0]]} overlap on accelerator(s) {clash}"
                )
            for d in devs:
                owner[d] = members
            out[s] = devs
    for s, members in enumerate(sets):
        if out[s] is not None:
            continue
        need = max(by_name[m].num_gpus for m in members)
        free = [d for d in range(total) if d not in owner and d not in busy]
        if need > len(free):
            raise PlacementError(
                f"{mode}: group(s) {members} ask {need} accelerator(s) but only "
                f"{len(free)} of {total} are free"
            )
        out[s] = tuple(free[:need])
        for d in out[s]:
            owner[d] = members
    return [tuple(o or ()) for o in out]


def _check_overlaps(mode: str, located: list, bundle_of: Mapping[tuple[int, tuple[int, ...]], int]) -> None:
    """Two ranks on different but intersecting accelerator sets cannot be expressed as bundles."""
    seen: dict[tuple[int, int], tuple[int, ...]] = {}
    for g, r, node, local, _ in located:
        for d in local:
            other = seen.setdefault((node, d), local)
            if other != local:
                raise PlacementError(
                    f"{mode}: {g.name}[{r}] uses accelerators {list(local)} on node {node}, "
                    f"which partly overlap {list(other)}; groups sharing accelerators "
                    "need the same gpus_per_rank"
                )
