"""``conf/cluster/*.yaml`` -> a typed ``SchedulerConfig`` -> a running ``Scheduler``.

One YAML file describes where Ray is, how groups are placed and what each group asks for::

    address: local              # null/local: start Ray here on 127.0.0.1; "auto" / "ray://...": join
    num_gpus: 2                 # logical GPUs for a local start (a CPU laptop plans like a GPU node)
    placement:
      mode: hybrid              # collocated | disaggregated | hybrid (the placement registry)
      share: [[env, rollout]]   # mode options (hybrid: which groups share accelerators)
      affinity: off             # off | auto | {group: cores}
    groups:
      env: {num_ranks: 1}
      rollout: {num_ranks: 1, gpus_per_rank: 1}
      actor: {num_ranks: 1, gpus_per_rank: 1}
    resources: {num_nodes: 8, gpus_per_node: 8, cpus_per_node: 64}   # optional: plan without Ray

Validated once here (unknown keys and bad values name the key); the rest of the code takes the
typed objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlinf_robot.errors import ConfigError
from rlinf_robot.scheduler.cluster import Cluster, ClusterConfig
from rlinf_robot.scheduler.placement import Plan, make_plan
from rlinf_robot.scheduler.resources import GroupSpec, ResourceSpec

_CLUSTER_KEYS = set(ClusterConfig.__dataclass_fields__)
_TOP_KEYS = _CLUSTER_KEYS | {"placement", "groups", "resources", "reserve_timeout_s", "start_timeout_s"}


@dataclass(frozen=True)
class SchedulerConfig:
    cluster: ClusterConfig
    mode: str
    groups: tuple[GroupSpec, ...]
    affinity: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    resources: ResourceSpec | None = None
    reserve_timeout_s: float = 60.0
    #: How long a launched group may take to answer its first call: a worker's process start and its
    #: imports (torch) took ~290 s on a 1-CPU cap with load beside it, ~5 s on a quiet machine. A
    #: worker whose ``__init__`` fails raises at once; only a hung start waits this out.
    start_timeout_s: float = 600.0

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any]) -> SchedulerConfig:
        cfg = dict(cfg)
        unknown = set(cfg) - _TOP_KEYS
        if unknown:
            raise ConfigError(f"cluster config: unknown keys {sorted(unknown)}; allowed {sorted(_TOP_KEYS)}")
        placement = dict(cfg.get("placement") or {})
        mode = placement.pop("mode", "disaggregated")
        affinity = placement.pop("affinity", None)
        groups_cfg = cfg.get("groups") or {}
        if not isinstance(groups_cfg, Mapping) or not groups_cfg:
            raise ConfigError(
                "cluster config: groups must map group names to {num_ranks, gpus_per_rank, ...}"
            )
        groups = tuple(GroupSpec.from_dict(name, dict(g or {})) for name, g in groups_cfg.items())
        res = cfg.get("resources")
        timeout = cfg.get("reserve_timeout_s", cls.reserve_timeout_s)
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"reserve_timeout_s must be a number > 0, got {timeout!r}")
        start = cfg.get("start_timeout_s", cls.start_timeout_s)
        if not isinstance(start, (int, float)) or start <= 0:
            raise ConfigError(f"start_timeout_s must be a number > 0, got {start!r}")
        out = cls(
            cluster=ClusterConfig.from_dict({k: cfg[k] for k in _CLUSTER_KEYS if k in cfg}),
            mode=str(mode),
            groups=groups,
            affinity=affinity,
            options=placement,
            resources=ResourceSpec.from_dict(res) if res else None,
            reserve_timeout_s=float(timeout),
            start_timeout_s=float(start),
        )
        if out.resources is not None:
            out.plan(out.resources)  # fail at load time, not after Ray started
        return out

    @classmethod
    def from_yaml(cls, path: str | Path) -> SchedulerConfig:
        import yaml

        text = Path(path).read_text()
        data = yaml.safe_load(text) or {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: expected a mapping at the top level")
        return cls.from_dict(data)

    def plan(self, resources: ResourceSpec | None = None) -> Plan:
        res = resources or self.resources
        if res is None:
            raise ConfigError(
                "no resources to plan on: pass a ResourceSpec or set `resources:` in the config"
            )
        return make_plan(self.mode, res, self.groups, affinity=self.affinity, **self.options)


class Scheduler:
    """Cluster + plan + reservation + the groups launched in it, torn down together.

    >>> # with Scheduler(SchedulerConfig.from_yaml("rlinf_robot/conf/cluster/hybrid.yaml")) as s:
    >>> #     env = s.launch("env", SimEnvWorker, kwargs={...}); rollout = s.launch("rollout", ...)
    """

    def __init__(self, config: SchedulerConfig, cluster: Cluster | None = None):
        self.config = config
        self._owns_cluster = cluster is None
        self.cluster = cluster or Cluster(config.cluster)
        try:
            self.plan = config.plan(self.cluster.resource_spec())
            self.reservation = self.cluster.reserve(self.plan, config.reserve_timeout_s)
        except BaseException:
            if self._owns_cluster:
                self.cluster.shutdown()
            raise
        self.groups: dict[str, Any] = {}

    def launch(self, name: str, worker_cls: type, **launch_kwargs: Any) -> Any:
        from rlinf_robot.scheduler.worker_group import WorkerGroup

        if name in self.groups:
            raise ConfigError(f"group {name!r} already launched")
        launch_kwargs.setdefault("start_timeout_s", self.config.start_timeout_s)
        self.groups[name] = WorkerGroup.launch(worker_cls, name, self.reservation, **launch_kwargs)
        return self.groups[name]

    def sharing_with(self, name: str) -> list[str]:
        """Launched groups whose ranks share an accelerator bundle with group ``name``."""
        mine = {r.bundle for r in self.plan.group(name) if r.gpus}
        return [g for g in self.groups if g != name and any(r.bundle in mine for r in self.plan.group(g))]

    def activate(self, name: str, timeout_s: float = 300.0) -> dict[str, list[dict[str, float]]]:
        """Collocated time-slicing: offload every group sharing ``name``'s accelerators, then onload
        ``name``. Returns each group's per-rank reports (bytes moved, seconds)."""
        idle = self.sharing_with(name)
        reports = {g: self.groups[g].call("offload") for g in idle}
        out = {g: r.wait(timeout_s) for g, r in reports.items()}
        out[name] = self.groups[name].call("onload").wait(timeout_s)
        return out

    def shutdown(self) -> None:
        for group in reversed(list(self.groups.values())):
            group.shutdown()
        self.groups.clear()
        self.reservation.release()
        if self._owns_cluster:
            self.cluster.shutdown()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
