"""``Worker``: the base class of every process the scheduler launches (one Ray actor per rank).

How to write a worker
---------------------
Subclass ``Worker``, do your set-up in ``__init__`` (call ``super().__init__()`` first), and expose
plain methods; ``WorkerGroup`` calls them on all ranks or one::

    class ActorWorker(Worker):
        def __init__(self, lr: float = 1e-3):
            super().__init__()
            import torch                       # heavy imports inside the worker process
            self.model = torch.nn.Linear(8, 2).to(self.device)
            self.optim = torch.optim.Adam(self.model.parameters(), lr=lr)
            self.register_offload(model=self.model, optim=self.optim)   # collocated mode

        def train_step(self, batch: dict) -> dict:
            with self.timeline.span("train_step"):
                ...
            return {"loss": 0.0}

    group = WorkerGroup.launch(ActorWorker, "actor", reservation, kwargs={"lr": 3e-4})
    losses = group.call("train_step", batch).wait()          # one result per rank

What the base gives a subclass (already set when ``__init__`` runs):

- ``self.rank``, ``self.world_size``, ``self.local_rank``, ``self.group_name``, ``self.info``
  (the full ``WorkerInfo``: node, accelerators, cores); env vars ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` (for ``torch.distributed`` within the group)
  and ``CUDA_VISIBLE_DEVICES``: exactly the rank's planned accelerators (``info.gpus``, node-local;
  logical ids on CPU test clusters), set before your ``__init__`` runs. Ray picks GPU ids by count
  only, so the bootstrap overrides its choice; ``ray.get_gpu_ids()`` still reports Ray's pick.
  Do not touch CUDA while your worker's module is imported: CUDA reads the variable once.
- ``self.device``: ``"cuda"`` when the rank holds an accelerator and CUDA works, else ``"cpu"``.
- CPU pinning and thread count (``OMP_NUM_THREADS``, torch threads) from the placement.
- ``offload()`` / ``onload()`` for what ``register_offload`` named (time and bytes reported).
- ``self.timeline``: spans exported to Chrome trace via ``timeline_events()``.
- weight sync: override ``weights_module()`` to return the torch module; then the driver's
  ``weight_sync.push_weights(actor_group, rollout_group, version)`` calls ``publish_weights`` on
  the sender's rank 0 and ``load_weights`` on every receiver (``self.weights_version`` records it).

Arguments and return values cross process boundaries through Ray: keep them plain data (numpy
arrays, tensors, dicts, lists, numbers, strings). Workers are created by ``WorkerGroup``; do not
call ``ray.remote`` on them yourself.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from rlinf_robot.scheduler.affinity import pin_to
from rlinf_robot.scheduler.timeline import Timeline


@dataclass(frozen=True)
class WorkerInfo:
    """Everything a rank knows about itself; travels to the process as a plain dict."""

    group: str
    rank: int
    world_size: int
    node: int = 0
    local_rank: int = 0
    gpus: tuple[int, ...] = ()
    cores: tuple[int, ...] = ()
    num_threads: int = 1
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkerInfo:
        d = dict(d)
        d["gpus"], d["cores"] = tuple(d.get("gpus", ())), tuple(d.get("cores", ()))
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Worker:
    """Base class of workers; see the module docstring for how to subclass it."""

    #: Set by the bootstrap before ``__init__``; a default lets a worker be built in-process in tests.
    info: WorkerInfo = WorkerInfo(group="local", rank=0, world_size=1)

    def __init__(self) -> None:
        self.timeline = Timeline(f"{self.info.group}[{self.info.rank}]")
        self._offload_targets: dict[str, Any] = {}
        self._offloaded: Any = None
        self.weights_version = -1  # version of the weights this worker holds (-1: initial weights)

    # ---------------------------------------------------------------- identity
    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    @property
    def local_rank(self) -> int:
        return self.info.local_rank

    @property
    def group_name(self) -> str:
        return self.info.group

    @property
    def device(self) -> str:
        if not self.info.gpus:
            return "cpu"
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def worker_info(self) -> dict[str, Any]:
        """Identity and what the process really got (pid, visible accelerators, allowed cores)."""
        return {
            **self.info.to_dict(),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "affinity": sorted(os.sched_getaffinity(0)),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "master": (os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")),
        }

    def ping(self, value: Any = None) -> Any:
        return value

    def cpu_seconds(self) -> float:
        """CPU time this process used so far (all threads): overheads measured in CPU time are not
        inflated by other work on a shared machine the way wall time is."""
        return time.process_time()

    # ---------------------------------------------------------------- offload / onload
    def register_offload(self, **targets: Any) -> None:
        """Name the torch modules / optimizers that ``offload()`` moves to host memory."""
        self._offload_targets.update(targets)

    def offload(self) -> dict[str, float]:
        """Move registered state to host memory and free it on the device. Returns bytes and seconds."""
        from rlinf_robot.scheduler.offload import offload_state

        if self._offloaded is not None:
            return {"bytes": 0, "seconds": 0.0}
        t0 = time.perf_counter()
        self._offloaded = offload_state(self._offload_targets)
        return {"bytes": self._offloaded.nbytes, "seconds": time.perf_counter() - t0}

    def onload(self) -> dict[str, float]:
        """Bring offloaded state back to the worker's device, bit-exact."""
        from rlinf_robot.scheduler.offload import onload_state

        if self._offloaded is None:
            return {"bytes": 0, "seconds": 0.0}
        t0 = time.perf_counter()
        nbytes = onload_state(self._offloaded, self._offload_targets, self.device)
        self._offloaded = None
        return {"bytes": nbytes, "seconds": time.perf_counter() - t0}

    @property
    def is_offloaded(self) -> bool:
        return self._offloaded is not None

    # ---------------------------------------------------------------- weight sync
    def weights_module(self) -> Any:
        """The torch module whose weights are synced (sender: the trained policy; receiver: the
        inference copy). Override in workers that take part in weight sync."""
        raise NotImplementedError(f"{type(self).__name__} does not define weights_module()")

    def publish_weights(self, version: int, backend: str = "object_store") -> Any:
        """Sender side: publish the current weights as ``version``; returns a ``WeightTicket``."""
        from rlinf_robot.scheduler.weight_sync import backend as sync_backend

        return sync_backend(backend).publish(self._sync_ctx, self.weights_module(), version)

    def load_weights(self, ticket: Any) -> int:
        """Receiver side: load the weights of ``ticket``; returns (and records) the version now held."""
        from rlinf_robot.scheduler.weight_sync import backend as sync_backend

        self.weights_version = sync_backend(ticket.backend).receive(
            self._sync_ctx, self.weights_module(), ticket
        )
        return self.weights_version

    def weight_sync_open(self, world_size: int) -> tuple[str, int]:
        from rlinf_robot.scheduler.weight_sync import CollectiveSync

        return CollectiveSync.open_store(self._sync_ctx, world_size)

    def weight_sync_join(self, addr: str, port: int, rank: int, world_size: int, use_cuda: bool) -> None:
        from rlinf_robot.scheduler.weight_sync import CollectiveSync

        CollectiveSync.join(self._sync_ctx, addr, port, rank, world_size, use_cuda)

    @property
    def _sync_ctx(self) -> dict[str, Any]:
        if "_rlinf_sync_ctx" not in self.__dict__:
            self.__dict__["_rlinf_sync_ctx"] = {}
        return self.__dict__["_rlinf_sync_ctx"]

    # ---------------------------------------------------------------- timeline / lifecycle
    def timeline_events(self, drain: bool = True) -> list[dict[str, Any]]:
        return self.timeline.drain() if drain else list(self.timeline.events)

    def close(self) -> None:
        """Release resources (envs, sockets) before the process is killed. Override as needed."""


# -------------------------------------------------------------------- inside the worker process
def visible_devices(gpus: tuple[int, ...], node_visible: list[str] | None = None) -> str:
    """``CUDA_VISIBLE_DEVICES`` for a rank's planned node-local accelerators ``gpus``.

    Plan indices count the GPUs Ray sees on the node. A node started with its own
    ``CUDA_VISIBLE_DEVICES`` (a SLURM job, a shared machine) sees only those, so index i is that
    list's i-th entry.

    >>> visible_devices((2, 3))
    '2,3'
    >>> visible_devices((0, 1), ["4", "5", "6", "7"])
    '4,5'
    """
    if node_visible is None:
        return ",".join(map(str, gpus))
    bad = [g for g in gpus if not 0 <= g < len(node_visible)]
    if bad:
        raise RuntimeError(
            f"planned accelerator(s) {bad}, but this Ray node exposes only CUDA_VISIBLE_DEVICES={node_visible}"
        )
    return ",".join(node_visible[g] for g in gpus)


def _node_visible_gpus() -> list[str] | None:
    """The node's own ``CUDA_VISIBLE_DEVICES`` (None: every GPU). Ray has overwritten the variable
    with its pick by the time a worker is constructed; it keeps what the process started with."""
    try:
        from ray._private.worker import global_worker

        ids = global_worker.original_visible_accelerator_ids.get("GPU")
    except (ImportError, AttributeError):  # not in a Ray worker, or a Ray without the record
        return None
    return None if ids is None else [str(i) for i in ids]


def bootstrap(info: WorkerInfo) -> None:
    """Runs first in a worker process: env vars, CPU pinning and thread counts from the placement,
    and the niceness ``RLINF_WORKER_NICE`` (from the group's ``env``) asks for.

    ``CUDA_VISIBLE_DEVICES`` becomes the planned accelerators (an explicit ``env`` entry still wins).
    Ray sets the variable in an actor's creation task and leaves it alone in later method calls, so
    setting it here holds for the actor's life.
    """
    import sys

    env = {
        "RANK": str(info.rank),
        "WORLD_SIZE": str(info.world_size),
        "LOCAL_RANK": str(info.local_rank),
        "RLINF_GROUP": info.group,
        "OMP_NUM_THREADS": str(info.num_threads),
        "MKL_NUM_THREADS": str(info.num_threads),
    }
    if info.gpus:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            raise RuntimeError(
                f"{info.group}[{info.rank}]: CUDA started before the worker bootstrap, so its planned "
                f"accelerators {list(info.gpus)} cannot take effect; keep CUDA calls out of module import"
            )
        env["CUDA_VISIBLE_DEVICES"] = visible_devices(info.gpus, _node_visible_gpus())
    os.environ.update({**env, **info.env})
    nice = int(os.environ.get("RLINF_WORKER_NICE", "0") or 0)
    if nice > 0:  # before the worker's threads exist: they inherit it
        # (e.g. learner workers beside a robot PC on the same machine: the arm's loops go first)
        try:
            os.nice(nice)
        except OSError:
            pass
    if info.cores:
        pin_to(info.cores)
    if "torch" in sys.modules:  # already imported (e.g. by a parent class module): resize its pool
        sys.modules["torch"].set_num_threads(info.num_threads)


def hosted_class(cls: type) -> type:
    """A subclass of ``cls`` whose constructor takes the ``WorkerInfo`` dict first and bootstraps.

    The info must be in place before the user's ``__init__`` runs (it may read ``self.rank`` or
    import torch, which fixes its thread pool), so it cannot be sent by a later method call.
    """

    def __init__(self, _rlinf_info: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        info = WorkerInfo.from_dict(_rlinf_info)
        bootstrap(info)
        self.info = info
        cls.__init__(self, *args, **kwargs)
        if not hasattr(self, "timeline"):
            raise TypeError(f"{cls.__name__}.__init__ must call super().__init__()")

    def _rlinf_set_master(self, addr: str, port: int) -> None:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)

    def _rlinf_free_port(self) -> tuple[str, int]:
        import ray

        with socket.socket() as s:
            s.bind(("127.0.0.1" if _is_loopback() else "", 0))
            port = s.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    return type(
        cls.__name__,
        (cls,),
        {
            "__init__": __init__,
            "__qualname__": cls.__qualname__,
            "__module__": cls.__module__,
            "__doc__": cls.__doc__,
            "_rlinf_set_master": _rlinf_set_master,
            "_rlinf_free_port": _rlinf_free_port,
        },
    )


def _is_loopback() -> bool:
    import ray

    return ray.util.get_node_ip_address().startswith("127.")
