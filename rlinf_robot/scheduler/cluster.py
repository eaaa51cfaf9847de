"""``Cluster``: connect to or start Ray, describe its nodes, reserve a placement plan.

A local start binds every Ray server to 127.0.0.1 (Ray otherwise resolves "127.0.0.1" to the
machine's routable address and listens on all interfaces): ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
makes Ray treat the machine as a single-node cluster on the loopback address, the same mode it
uses on macOS. ``RAY_AUTH_MODE=disabled`` is set for local starts only. Logical GPUs
(``num_gpus=4`` on a CPU machine) make every placement testable without accelerators: Ray accounts
for them and each rank gets ``CUDA_VISIBLE_DEVICES`` exactly as on a GPU node.

Which accelerator a rank uses comes from the plan, not from Ray: a bundle asks Ray for a GPU
*count*, and Ray hands out whichever ids it likes (on a fresh cluster an explicit
``devices: "2-3"`` got 0 and 1). The worker bootstrap sets ``CUDA_VISIBLE_DEVICES`` to the rank's planned indices instead
(``worker.bootstrap``), and the ``Cluster`` keeps a ledger of the indices its live reservations
hold: ``nodes()`` reports them as ``busy_gpus`` (so the next plan avoids them) and ``reserve``
refuses a plan that reuses one. Ray's own bookkeeping still counts the GPUs; actors started
outside a reservation (plain ``ray.remote(num_gpus=...)``) are not in the ledger and get Ray's ids.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlinf_robot.errors import ConfigError, MissingDependency
from rlinf_robot.scheduler.errors import PlacementError
from rlinf_robot.scheduler.plan import Plan, RankPlacement
from rlinf_robot.scheduler.resources import NodeSpec, ResourceSpec

log = logging.getLogger(__name__)

LOCAL_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # single-node mode: node IP = 127.0.0.1, bind loopback
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
}


#: Ray's raylet must register within a fixed 30 s; on an overloaded machine a second try usually works.
LOCAL_START_ATTEMPTS = 2


def _ray():
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - ray is in the learn extra
        raise MissingDependency("ray", extra="learn") from exc
    return ray


@dataclass(frozen=True)
class ClusterConfig:
    """``conf/cluster/*.yaml``: ``address`` null/"local" starts Ray here; anything else connects."""

    address: str | None = None
    num_cpus: int | None = None
    num_gpus: int = 0
    namespace: str = "rlinf_robot"
    object_store_memory: int | None = None
    log_to_driver: bool = True

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any]) -> ClusterConfig:
        known = set(cls.__dataclass_fields__)
        unknown = set(cfg) - known
        if unknown:
            raise ConfigError(f"cluster: unknown keys {sorted(unknown)}; allowed {sorted(known)}")
        out = cls(**dict(cfg))
        for key in ("num_cpus", "num_gpus"):
            v = getattr(out, key)
            if v is not None and (not isinstance(v, int) or v < 0):
                raise ConfigError(f"cluster.{key} must be an integer >= 0, got {v!r}")
        return out

    @property
    def is_local(self) -> bool:
        return self.address in (None, "", "local")


class Cluster:
    """A Ray session. Use as a context manager, or call ``shutdown()``; it only stops what it started."""

    def __init__(self, config: ClusterConfig | None = None, **overrides: Any):
        self.config = config or ClusterConfig.from_dict(overrides)
        if config is not None and overrides:
            self.config = ClusterConfig.from_dict({**config.__dict__, **overrides})
        self._owns_ray = False
        self._reservations: list[Reservation] = []  # the ledger of accelerators in use (see module doc)
        self._start()

    def _start(self) -> None:
        ray = _ray()
        cfg = self.config
        if ray.is_initialized():
            log.info("reusing the Ray session of this process")
            return
        t0 = time.perf_counter()
        if cfg.is_local:
            os.environ.update(LOCAL_ENV)  # inherited by the Ray processes started below
            # Ray read the first variable when it was imported; this process may have imported it
            # before us, so set the constant it derived too (read at call time by services.py).
            from ray._private import ray_constants

            ray_constants.ENABLE_RAY_CLUSTER = False
            for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
                try:
                    ray.init(
                        address="local",
                        num_cpus=cfg.num_cpus,
                        num_gpus=cfg.num_gpus,
                        include_dashboard=False,
                        _node_ip_address="127.0.0.1",
                        namespace=cfg.namespace,
                        object_store_memory=cfg.object_store_memory,
                        log_to_driver=cfg.log_to_driver,
                    )
                    break
                except Exception as exc:  # Ray gives its raylet a fixed 30 s to register
                    if "timed out during startup" not in str(exc) or attempt == LOCAL_START_ATTEMPTS:
                        raise
                    log.warning("Ray start timed out (machine overloaded?); stopping it and retrying once")
                    ray.shutdown()
        else:
            ray.init(address=cfg.address, namespace=cfg.namespace, log_to_driver=cfg.log_to_driver)
        self._owns_ray = True
        log.info(
            "Ray %s up in %.1f s: %s",
            "started" if cfg.is_local else "connected",
            time.perf_counter() - t0,
            self.resource_spec(),
        )

    # ---------------------------------------------------------------- description
    def nodes(self, available: bool = False) -> list[NodeSpec]:
        """Alive nodes, head first, with their CPUs, (logical) GPUs and IP address; the GPUs this
        cluster's live reservations hold are ``busy_gpus``.

        ``available``: also the free CPU amount as ``cpu_budget`` (for planning a group next to
        groups already running).
        """
        ray = _ray()
        from ray._private import state

        free = state.available_resources_per_node() if available else {}
        alive = [n for n in ray.nodes() if n.get("Alive")]
        alive.sort(key=lambda n: (not n["Resources"].get("node:__internal_head__"), n["NodeManagerAddress"]))
        held = self.held_gpus()
        out = []
        for i, n in enumerate(alive):
            res = n["Resources"]
            spare = free.get(n["NodeID"], {}) if available else res
            out.append(
                NodeSpec(
                    num_cpus=max(1, int(res.get("CPU", 0))),
                    num_gpus=int(res.get("GPU", 0)),
                    address=n["NodeManagerAddress"],
                    cpu_budget=float(spare.get("CPU", 0.0)) if available else None,
                    busy_gpus=tuple(sorted(d for node, d in held if node == i)),
                )
            )
        return out

    def held_gpus(self) -> dict[tuple[int, int], str]:
        """(node, node-local accelerator) -> the rank holding it, over this cluster's live reservations."""
        self._reservations = [r for r in self._reservations if r.placement_group is not None]
        return {
            (p.node, d): f"{p.group}[{p.rank}]"
            for r in self._reservations
            for p in r.plan.ranks
            for d in p.gpus
        }

    def resource_spec(self, available: bool = False) -> ResourceSpec:
        return ResourceSpec(tuple(self.nodes(available)))

    def accelerator_types(self) -> list[str]:
        """Accelerator models Ray detected (``accelerator_type:H200`` resources); empty on CPU."""
        ray = _ray()
        return sorted(
            {
                k.split(":", 1)[1]
                for n in ray.nodes()
                if n.get("Alive")
                for k in n["Resources"]
                if k.startswith("accelerator_type:")
            }
        )

    def live_actors(self) -> list[dict[str, Any]]:
        """Actors not yet dead in this namespace (leak checks after teardown)."""
        ray = _ray()
        from ray._private import state

        out = []
        for actor in state.actors().values():
            if (
                actor.get("State") != "DEAD"
                and actor.get("RayNamespace", self.config.namespace) == ray.get_runtime_context().namespace
            ):
                out.append(
                    {
                        "name": actor.get("Name"),
                        "class": actor.get("ActorClassName"),
                        "state": actor.get("State"),
                    }
                )
        return out

    # ---------------------------------------------------------------- reservation
    def reserve(self, plan: Plan, timeout_s: float = 60.0) -> Reservation:
        """Create one placement group for ``plan`` and wait until Ray has reserved every bundle."""
        ray = _ray()
        from ray.util.placement_group import placement_group, remove_placement_group

        nodes = self.nodes()
        if len(plan.resources.nodes) > len(nodes):
            raise PlacementError(f"plan needs {len(plan.resources.nodes)} nodes, cluster has {len(nodes)}")
        held = self.held_gpus()
        taken = sorted({(p.node, d) for p in plan.ranks for d in p.gpus} & held.keys())
        if taken:
            raise PlacementError(
                f"{plan.mode} plan reuses accelerator(s) held by live reservations: "
                + ", ".join(f"node {n} gpu {d} ({held[(n, d)]})" for n, d in taken)
                + "; plan on cluster.resource_spec(), which marks them busy, or release those first"
            )
        pin = len(nodes) > 1
        bundles = [b.resources(nodes[b.node].address if pin else "") for b in plan.bundles]
        pg = placement_group(bundles, strategy="PACK")
        try:
            ray.get(pg.ready(), timeout=timeout_s)
        except Exception as exc:
            remove_placement_group(pg)
            raise PlacementError(
                f"Ray could not reserve the {plan.mode} plan within {timeout_s:.0f}s: bundles {bundles} vs "
                f"cluster {ray.cluster_resources()}"
            ) from exc
        log.info("reserved placement:\n%s", plan.describe())
        reservation = Reservation(plan, pg)
        self._reservations.append(reservation)
        return reservation

    # ---------------------------------------------------------------- lifecycle
    def shutdown(self) -> None:
        ray = _ray()
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._reservations = []  # their placement groups went with the session
        self._owns_ray = False

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class Reservation:
    """A plan with its Ray placement group: tells ``WorkerGroup`` how to schedule each rank."""

    def __init__(self, plan: Plan, pg: Any):
        self.plan = plan
        self.placement_group = pg

    def actor_options(self, rank: RankPlacement) -> dict[str, Any]:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        return {
            "num_cpus": rank.cpu_share,
            "num_gpus": rank.gpu_share,
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                self.placement_group, placement_group_bundle_index=rank.bundle
            ),
        }

    def release(self) -> None:
        if self.placement_group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.placement_group)
            self.placement_group = None
