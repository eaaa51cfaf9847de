"""``WorkerGroup``: N ranks of one ``Worker`` class as Ray actors, placed by a reservation.

Calls fan out to all ranks (or one) and come back as a ``GroupResult`` of futures; ``wait()``
collects them and fails fast: the first rank that raised or died stops the wait with a typed error
naming the group, rank and method (``WorkerError`` / ``WorkerCrashed``), and a rank that does not
answer within the timeout raises ``WorkerTimeout`` instead of hanging the driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rlinf_robot.scheduler.cluster import Cluster, Reservation
from rlinf_robot.scheduler.errors import WorkerCrashed, WorkerError, WorkerTimeout
from rlinf_robot.scheduler.placement import GroupSpec, RankPlacement, make_plan
from rlinf_robot.scheduler.worker import Worker, WorkerInfo, hosted_class

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT_S = 300.0


class GroupResult:
    """Futures of one call on some ranks of a group. ``refs`` can be passed on to other calls."""

    def __init__(
        self,
        group: str,
        method: str,
        ranks: Sequence[int],
        refs: Sequence[Any],
        default_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
    ):
        self.group, self.method = group, method
        self.ranks, self.refs = list(ranks), list(refs)
        self._default_timeout_s = default_timeout_s

    def wait(self, timeout: float | None = -1.0) -> list[Any]:
        """Results in rank order. ``timeout=None`` waits forever; the default is the group's."""
        import ray

        timeout = self._default_timeout_s if timeout is not None and timeout < 0 else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        index = {ref: i for i, ref in enumerate(self.refs)}
        results: list[Any] = [None] * len(self.refs)
        pending = list(self.refs)
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, pending = ray.wait(pending, num_returns=1, timeout=left)
            if not ready:
                late = [self.ranks[index[r]] for r in pending]
                raise WorkerTimeout(
                    f"{self.group}.{self.method}(): rank(s) {late} not done after {timeout:.1f}s"
                )
            i = index[ready[0]]
            try:
                results[i] = self._get(ready[0], self.ranks[i])
            except BaseException:
                _drain_errors(pending)
                raise
        return results

    def wait_one(self, timeout: float | None = -1.0) -> Any:
        (out,) = self.wait(timeout)
        return out

    def _get(self, ref: Any, rank: int) -> Any:
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return ray.get(ref)
        except RayTaskError as exc:  # the method raised (first: Ray's error classes mix in the cause's)
            cause = exc.cause
            if isinstance(cause, RayActorError):  # ...because a worker it was calling died
                detail = "a worker it was waiting on died:\n" + _first_lines(str(cause))
                raise WorkerError(self.group, rank, self.method, detail) from None
            raise WorkerError(self.group, rank, self.method, str(exc)) from cause
        except RayActorError as exc:  # this worker's process died
            raise WorkerCrashed(self.group, rank, self.method, _first_lines(str(exc))) from None


def _drain_errors(refs: list[Any]) -> None:
    """Fetch (and drop) the other ranks' results that are already in, so Ray does not log every
    failed rank as an 'unhandled error' once we raise for the first one."""
    import ray

    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0.05) if refs else ([], [])
    for ref in ready:
        try:
            ray.get(ref)
        except Exception:  # noqa: BLE001 - the first failure is the one being raised
            pass


def _first_lines(text: str, n: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[:n])


class WorkerGroup:
    """Ranks of one worker class. Create with ``launch`` (from a reservation) or ``spawn`` (own plan)."""

    def __init__(
        self,
        name: str,
        worker_cls: type,
        actors: list[Any],
        placements: list[RankPlacement],
        reservation: Reservation,
        owns_reservation: bool,
        call_timeout_s: float,
    ):
        self.name = name
        self.worker_cls = worker_cls
        self.actors = actors
        self.placements = placements
        self.reservation = reservation
        self._owns_reservation = owns_reservation
        self.call_timeout_s = call_timeout_s

    # ---------------------------------------------------------------- creation
    @classmethod
    def launch(
        cls,
        worker_cls: type,
        name: str,
        reservation: Reservation,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None,
        max_concurrency: int = 1,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        start_timeout_s: float = 120.0,
        _owns_reservation: bool = False,
    ) -> WorkerGroup:
        """Start one actor per rank of group ``name`` in ``reservation`` and wait until all are up.

        ``env`` adds environment variables: one dict for every rank or a list with one per rank.
        """
        import ray

        if not (isinstance(worker_cls, type) and issubclass(worker_cls, Worker)):
            raise TypeError(f"{worker_cls!r} is not a Worker subclass")
        placements = reservation.plan.group(name)
        world = len(placements)
        envs = list(env) if isinstance(env, Sequence) else [dict(env or {})] * world
        if len(envs) != world:
            raise ValueError(f"env lists {len(envs)} dicts for {world} ranks of {name!r}")
        remote_cls = ray.remote(hosted_class(worker_cls))
        actors = []
        for p, extra in zip(placements, envs, strict=True):
            local_rank = sum(1 for q in placements if q.node == p.node and q.rank < p.rank)
            info = WorkerInfo(
                group=name,
                rank=p.rank,
                world_size=world,
                node=p.node,
                local_rank=local_rank,
                gpus=p.gpus,
                cores=p.cores,
                num_threads=p.threads,
                env={str(k): str(v) for k, v in extra.items()},
            )
            opts = reservation.actor_options(p)
            actors.append(
                remote_cls.options(
                    name=f"{name}/{p.rank}", max_concurrency=max_concurrency, max_restarts=0, **opts
                ).remote(info.to_dict(), *args, **dict(kwargs or {}))
            )
        group = cls(name, worker_cls, actors, placements, reservation, _owns_reservation, call_timeout_s)
        try:
            addr, port = group.call_rank(0, "_rlinf_free_port").wait_one(start_timeout_s)
            group.call("_rlinf_set_master", addr, port).wait(start_timeout_s)
        except BaseException:
            group.shutdown()
            raise
        log.info("launched %s: %d rank(s) of %s", name, world, worker_cls.__name__)
        return group

    @classmethod
    def spawn(
        cls,
        worker_cls: type,
        name: str,
        cluster: Cluster,
        num_ranks: int = 1,
        *,
        gpus_per_rank: int = 0,
        cpus_per_rank: int = 1,
        affinity: Any = None,
        **launch_kwargs: Any,
    ) -> WorkerGroup:
        """A group on its own resources (a one-group plan); its reservation is released on shutdown."""
        spec = GroupSpec(name, num_ranks, gpus_per_rank=gpus_per_rank, cpus_per_rank=cpus_per_rank)
        plan = make_plan("disaggregated", cluster.resource_spec(available=True), [spec], affinity=affinity)
        reservation = cluster.reserve(plan)
        try:
            return cls.launch(worker_cls, name, reservation, _owns_reservation=True, **launch_kwargs)
        except BaseException:
            reservation.release()
            raise

    # ---------------------------------------------------------------- calls
    @property
    def world_size(self) -> int:
        return len(self.actors)

    def call(self, method: str, *args: Any, **kwargs: Any) -> GroupResult:
        """Call ``method`` with the same arguments on every rank."""
        return self._submit(method, range(self.world_size), [(args, kwargs)] * self.world_size)

    def call_rank(self, rank: int, method: str, *args: Any, **kwargs: Any) -> GroupResult:
        if not 0 <= rank < self.world_size:
            raise IndexError(f"{self.name} has ranks 0-{self.world_size - 1}, not {rank}")
        return self._submit(method, [rank], [(args, kwargs)])

    def scatter(self, method: str, per_rank: Sequence[Any]) -> GroupResult:
        """Call ``method(per_rank[i])`` on rank i (e.g. one shard of a batch per rank)."""
        if len(per_rank) != self.world_size:
            raise ValueError(f"scatter needs {self.world_size} items for {self.name}, got {len(per_rank)}")
        return self._submit(method, range(self.world_size), [((x,), {}) for x in per_rank])

    def _submit(self, method: str, ranks: Sequence[int], calls: Sequence[tuple[tuple, dict]]) -> GroupResult:
        if not self.actors:
            raise WorkerCrashed(self.name, -1, method, "the group was shut down")
        if not method.startswith("_rlinf_") and not callable(getattr(self.worker_cls, method, None)):
            raise AttributeError(f"{self.worker_cls.__name__} has no method {method!r}")
        refs = [
            getattr(self.actors[r], method).remote(*a, **kw) for r, (a, kw) in zip(ranks, calls, strict=True)
        ]
        return GroupResult(self.name, method, list(ranks), refs, self.call_timeout_s)

    # ---------------------------------------------------------------- teardown
    def shutdown(self, timeout_s: float = 10.0) -> None:
        """``close()`` every live rank (bounded), kill the actors, release an owned reservation."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        if self.actors:
            refs = [a.close.remote() for a in self.actors]
            try:
                ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
            except RayError:  # dead ranks cannot close; killing them below is enough
                pass
            for a in self.actors:
                try:
                    ray.kill(a, no_restart=True)
                except (RayError, GetTimeoutError, ValueError):
                    pass
            self.actors = []
        if self._owns_reservation:
            self.reservation.release()

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"WorkerGroup({self.name!r}, {self.worker_cls.__name__}, world_size={self.world_size})"
