"""What a cluster has (``ResourceSpec``) and what each worker group asks for (``GroupSpec``).

Plain frozen dataclasses validated at construction, so a planner never sees a negative GPU count
and a config error names the key. They carry no Ray objects: a 2-GPU laptop and a 64-GPU cluster
are described the same way and planned by the same pure functions (``placement.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlinf_robot.scheduler.errors import PlacementError


def _check_int(owner: str, key: str, value: Any, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PlacementError(f"{owner}.{key} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class NodeSpec:
    """One machine: its CPU cores and accelerators. ``address`` is the Ray node IP, if known.

    Planning a group next to groups that already run uses what is still free: ``cpu_budget`` caps
    the Ray CPU amount a plan may reserve on the node (default: ``num_cpus``), and ``busy_gpus``
    (node-local indices) are accelerators a plan must not hand out. Accelerator indices are what
    ranks get as ``CUDA_VISIBLE_DEVICES``, so a busy one is named, not just counted.
    """

    num_cpus: int
    num_gpus: int = 0
    address: str = ""
    cpu_budget: float | None = None
    busy_gpus: tuple[int, ...] = ()

    def __post_init__(self):
        _check_int("node", "num_cpus", self.num_cpus, 1)
        _check_int("node", "num_gpus", self.num_gpus, 0)
        busy = tuple(sorted(set(self.busy_gpus)))
        object.__setattr__(self, "busy_gpus", busy)
        if any(not isinstance(d, int) or not 0 <= d < self.num_gpus for d in busy):
            raise PlacementError(
                f"node.busy_gpus must be node-local accelerator indices 0-{self.num_gpus - 1}, got {list(busy)}"
            )
        if self.cpu_budget is not None and not self.cpu_budget >= 0.001:
            raise PlacementError(
                f"no free CPU on node {self.address or '?'} (cpu_budget={self.cpu_budget!r}): plan every group "
                "in one make_plan(...) so CPU shares shrink to fit, instead of adding groups one by one"
            )


@dataclass(frozen=True)
class ResourceSpec:
    """The cluster as a planner sees it. Accelerators are numbered globally, node by node.

    >>> spec = ResourceSpec.uniform(num_nodes=2, gpus_per_node=4, cpus_per_node=16)
    >>> spec.total_gpus, spec.gpu_location(5)
    (8, (1, 1))
    """

    nodes: tuple[NodeSpec, ...]

    def __post_init__(self):
        if not self.nodes:
            raise PlacementError("resources.nodes must list at least one node")
        object.__setattr__(self, "nodes", tuple(self.nodes))

    @classmethod
    def uniform(cls, num_nodes: int = 1, gpus_per_node: int = 0, cpus_per_node: int = 1) -> ResourceSpec:
        _check_int("resources", "num_nodes", num_nodes, 1)
        return cls(tuple(NodeSpec(cpus_per_node, gpus_per_node) for _ in range(num_nodes)))

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any]) -> ResourceSpec:
        """``{"nodes": [{"num_cpus": 8, "num_gpus": 2}, ...]}`` or ``{"num_nodes", "gpus_per_node", "cpus_per_node"}``."""
        if "nodes" in cfg:
            return cls(tuple(NodeSpec(**dict(n)) for n in cfg["nodes"]))
        return cls.uniform(
            int(cfg.get("num_nodes", 1)), int(cfg.get("gpus_per_node", 0)), int(cfg.get("cpus_per_node", 1))
        )

    @property
    def total_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes)

    @property
    def busy_gpus(self) -> tuple[int, ...]:
        """Global indices of the accelerators held by groups already running (never planned).

        >>> ResourceSpec((NodeSpec(4, 2), NodeSpec(4, 2, busy_gpus=(1,)))).busy_gpus
        (3,)
        """
        return tuple(self.gpu_offset(i) + d for i, n in enumerate(self.nodes) for d in n.busy_gpus)

    def gpu_offset(self, node: int) -> int:
        """Global index of ``node``'s first accelerator."""
        return sum(n.num_gpus for n in self.nodes[:node])

    def gpu_location(self, global_gpu: int) -> tuple[int, int]:
        """Global accelerator index -> (node index, node-local index)."""
        if not 0 <= global_gpu < self.total_gpus:
            raise PlacementError(f"accelerator {global_gpu} does not exist (cluster has {self.total_gpus})")
        for i, node in enumerate(self.nodes):
            if global_gpu < node.num_gpus:
                return i, global_gpu
            global_gpu -= node.num_gpus
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class GroupSpec:
    """A worker group's demand: ``num_ranks`` processes, each with ``gpus_per_rank`` accelerators
    (0 = CPU-only) and ``cpus_per_rank`` cores. ``devices`` optionally pins the group to explicit
    global accelerator indices (``num_ranks * gpus_per_rank`` of them, rank-major)."""

    name: str
    num_ranks: int
    gpus_per_rank: int = 0
    cpus_per_rank: int = 1
    devices: tuple[int, ...] | None = field(default=None)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise PlacementError(f"group name must be a non-empty string without '/', got {self.name!r}")
        owner = f"groups.{self.name}"
        _check_int(owner, "num_ranks", self.num_ranks, 1)
        _check_int(owner, "gpus_per_rank", self.gpus_per_rank, 0)
        _check_int(owner, "cpus_per_rank", self.cpus_per_rank, 1)
        if self.devices is not None:
            devs = tuple(self.devices)
            object.__setattr__(self, "devices", devs)
            if self.gpus_per_rank == 0:
                raise PlacementError(f"{owner}.devices given but gpus_per_rank is 0")
            if len(devs) != self.num_gpus or len(set(devs)) != len(devs):
                raise PlacementError(
                    f"{owner}.devices must list {self.num_gpus} distinct accelerators "
                    f"(num_ranks * gpus_per_rank), got {list(devs)}"
                )

    @property
    def num_gpus(self) -> int:
        return self.num_ranks * self.gpus_per_rank

    @classmethod
    def from_dict(cls, name: str, cfg: Mapping[str, Any]) -> GroupSpec:
        known = {"num_ranks", "gpus_per_rank", "cpus_per_rank", "devices"}
        unknown = set(cfg) - known
        if unknown:
            raise PlacementError(f"groups.{name}: unknown keys {sorted(unknown)}; allowed {sorted(known)}")
        devices = cfg.get("devices")
        return cls(
            name=name,
            num_ranks=cfg.get("num_ranks", 1),
            gpus_per_rank=cfg.get("gpus_per_rank", 0),
            cpus_per_rank=cfg.get("cpus_per_rank", 1),
            devices=parse_ranges(devices) if devices is not None else None,
        )


def parse_ranges(value: str | int | Iterable[int]) -> tuple[int, ...]:
    """``"0-3,6"`` -> (0, 1, 2, 3, 6); lists and ints pass through.

    >>> parse_ranges("0-2,5")
    (0, 1, 2, 5)
    """
    if isinstance(value, int):
        return (value,)
    if not isinstance(value, str):
        return tuple(int(v) for v in value)
    out: list[int] = []
    for part in value.split(","):
        part = part.strip()
        lo, _, hi = part.partition("-")
        try:
            out.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError as exc:
            raise PlacementError(f"bad range {part!r} in {value!r} (expected 'a-b,c')") from exc
    return tuple(out)
