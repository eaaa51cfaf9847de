"""Weight sync from the actor (trainer) to rollout workers, versioned, behind one interface.

Backends (a registry; pick by name):

- ``object_store`` (default, any node): the sender flattens its state dict into numpy arrays and
  makes ONE ``ray.put``; every receiver ``ray.get``s the same object (zero-copy from shared memory on
  its node, one transfer per node) and copies into its model. The ticket carries the version.
- ``collective``: a broadcast over a process group made only for weight sync (so it never touches
  the trainer's own FSDP/DDP group): NCCL between GPU workers, gloo on CPU. The gloo path runs in
  the CPU test suite; the NCCL path is the same code and needs CUDA on every member.
- ``cuda_ipc``: collocated sender and receivers on one GPU; receivers copy straight from the
  sender's GPU memory (CUDA IPC handles). Written for GPU nodes; needs CUDA to run.

Driver side: ``push_weights(actor_group, rollout_group, version)``; every rollout then reports the
version it holds, and records it on each action it produces.
"""

from __future__ import annotations

import datetime
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_BACKENDS: dict[str, type[WeightSyncBackend]] = {}


def register_weight_sync(name: str) -> Callable[[type], type]:
    def deco(cls: type) -> type:
        _BACKENDS[name] = cls
        cls.name = name
        return cls

    return deco


def weight_sync_backends() -> list[str]:
    return sorted(_BACKENDS)


def backend(name: str) -> type[WeightSyncBackend]:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(f"weight sync backend {name!r} unknown; known: {weight_sync_backends()}") from None


@dataclass(frozen=True)
class WeightTicket:
    """What the driver hands to receivers: the version, the backend and its payload."""

    version: int
    backend: str
    payload: list = field(default_factory=list)  # object_store: [ObjectRef] (a list so Ray passes it through)


class WeightSyncBackend:
    name = ""

    @classmethod
    def push(
        cls, sender: Any, receivers: Any, version: int, timeout_s: float
    ) -> list[int]:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def publish(ctx: dict, module: Any, version: int) -> WeightTicket:  # pragma: no cover - interface
        raise NotImplementedError

    @staticmethod
    def receive(ctx: dict, module: Any, ticket: WeightTicket) -> int:  # pragma: no cover - interface
        raise NotImplementedError


def _names(module: Any) -> list[str]:
    return sorted(module.state_dict().keys())


@register_weight_sync("object_store")
class ObjectStoreSync(WeightSyncBackend):
    @classmethod
    def push(cls, sender: Any, receivers: Any, version: int, timeout_s: float) -> list[int]:
        """One put by the sender, then every receiver gets the same object."""
        ticket = sender.call_rank(0, "publish_weights", version, cls.name).wait_one(timeout_s)
        return receivers.call("load_weights", ticket).wait(timeout_s)

    @staticmethod
    def publish(ctx: dict, module: Any, version: int) -> WeightTicket:
        import ray
        import torch

        sd = module.state_dict()
        names = sorted(sd)
        arrays, dtypes = [], []
        for n in names:
            t = sd[n].detach().to("cpu")
            dtypes.append(str(t.dtype).removeprefix("torch."))
            if t.dtype == torch.bfloat16:  # numpy has no bfloat16: ship the bits
                t = t.view(torch.int16)
            arrays.append(t.contiguous().numpy())
        ref = ray.put({"version": int(version), "names": names, "dtypes": dtypes, "arrays": arrays})
        return WeightTicket(int(version), "object_store", [ref])

    @staticmethod
    def receive(ctx: dict, module: Any, ticket: WeightTicket) -> int:
        import ray
        import torch

        blob = ray.get(ticket.payload[0])
        mine = _names(module)
        if blob["names"] != mine:
            missing = sorted(set(mine) ^ set(blob["names"]))[:5]
            raise ValueError(f"weight sync v{ticket.version}: state dict keys differ, e.g. {missing}")
        state = {}
        with warnings.catch_warnings():  # arrays are read-only views of shared memory; we copy below
            warnings.simplefilter("ignore", UserWarning)
            for n, dt, a in zip(blob["names"], blob["dtypes"], blob["arrays"], strict=True):
                t = torch.from_numpy(a)
                state[n] = t.view(torch.bfloat16) if dt == "bfloat16" else t
            module.load_state_dict(state, strict=True)
        return int(blob["version"])


@register_weight_sync("collective")
class CollectiveSync(WeightSyncBackend):
    """Broadcast from sync-group rank 0 (the sender). Members call ``join`` first (see ``join_group``)."""

    @classmethod
    def push(cls, sender: Any, receivers: Any, version: int, timeout_s: float) -> list[int]:
        """A collective: sender and receivers must be in the call at the same time."""
        send = sender.call_rank(0, "publish_weights", version, cls.name)
        got = receivers.call("load_weights", WeightTicket(version, cls.name))
        send.wait(timeout_s)
        return got.wait(timeout_s)

    @staticmethod
    def open_store(ctx: dict, world_size: int, timeout_s: float = 60.0) -> tuple[str, int]:
        """On the sender: start the rendezvous store on a free port; returns (address, port)."""
        import ray
        import torch.distributed as dist

        addr = ray.util.get_node_ip_address()
        store = dist.TCPStore(
            addr, 0, world_size, True, timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False
        )
        ctx["store"] = store
        return addr, store.port

    @staticmethod
    def join(
        ctx: dict, addr: str, port: int, rank: int, world_size: int, use_cuda: bool, timeout_s: float = 60.0
    ) -> None:
        import torch.distributed as dist

        timeout = datetime.timedelta(seconds=timeout_s)
        store = ctx.get("store") if rank == 0 else None
        if store is None:
            store = dist.TCPStore(addr, port, world_size, False, timeout=timeout)
        if use_cuda:
            import torch

            if not (torch.cuda.is_available() and dist.is_nccl_available()):
                raise RuntimeError("collective weight sync on CUDA needs a GPU and a torch built with NCCL")
            torch.cuda.set_device(0)  # the worker sees only its own GPU(s) (CUDA_VISIBLE_DEVICES)
            pg = dist.ProcessGroupNCCL(store, rank, world_size, dist.ProcessGroupNCCL.Options())
        else:
            pg = dist.ProcessGroupGloo(store, rank, world_size, timeout)
        ctx.update(store=store, pg=pg, rank=rank, cuda=use_cuda)

    @staticmethod
    def _bcast(ctx: dict, tensor: Any) -> None:
        import torch.distributed as dist

        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        ctx["pg"].broadcast([tensor], opts).wait()

    @staticmethod
    def _header(module: Any, version: int) -> Any:
        import torch

        names = _names(module)
        return torch.tensor([version, len(names), zlib.crc32("\n".join(names).encode())], dtype=torch.int64)

    @staticmethod
    def publish(ctx: dict, module: Any, version: int) -> WeightTicket:
        import torch

        if "pg" not in ctx:
            raise RuntimeError("collective weight sync: join the sync group first")
        dev = "cuda" if ctx["cuda"] else "cpu"
        CollectiveSync._bcast(ctx, CollectiveSync._header(module, version).to(dev))
        sd = module.state_dict()
        with torch.no_grad():
            for n in sorted(sd):
                CollectiveSync._bcast(ctx, sd[n].detach().to(dev).contiguous())
        return WeightTicket(int(version), "collective")

    @staticmethod
    def receive(ctx: dict, module: Any, ticket: WeightTicket) -> int:
        import torch

        if "pg" not in ctx:
            raise RuntimeError("collective weight sync: join the sync group first")
        dev = "cuda" if ctx["cuda"] else "cpu"
        header = CollectiveSync._header(module, 0).to(dev)
        expect = header.clone()
        CollectiveSync._bcast(ctx, header)
        if header[1:].tolist() != expect[1:].tolist():
            raise ValueError("collective weight sync: sender and receiver state dict keys differ")
        sd = module.state_dict()
        with torch.no_grad():
            for n in sorted(sd):
                buf = sd[n].detach().to(dev).contiguous()
                CollectiveSync._bcast(ctx, buf)
                sd[n].copy_(buf)
        return int(header[0].item())


@register_weight_sync("cuda_ipc")
class CudaIpcSync(WeightSyncBackend):
    """Collocated ranks on the same GPU: the receiver maps the sender's GPU memory (CUDA IPC) and
    copies device-to-device; nothing goes through host memory. Needs CUDA (not exercised on the CPU
    test machine). The sender keeps a snapshot of the weights alive until its next publish, so
    training may continue while receivers copy."""

    @classmethod
    def push(cls, sender: Any, receivers: Any, version: int, timeout_s: float) -> list[int]:
        from rlinf_robot.errors import ConfigError

        mine = sender.call_rank(0, "worker_info").wait_one(timeout_s)["cuda_visible_devices"]
        theirs = {i["cuda_visible_devices"] for i in receivers.call("worker_info").wait(timeout_s)}
        if mine is None or theirs != {mine}:
            raise ConfigError(
                f"cuda_ipc weight sync needs sender and receivers on one GPU; sender sees "
                f"{mine!r}, receivers {sorted(map(str, theirs))}: use 'object_store' or 'collective'"
            )
        ticket = sender.call_rank(0, "publish_weights", version, cls.name).wait_one(timeout_s)
        return receivers.call("load_weights", ticket).wait(timeout_s)

    @staticmethod
    def publish(ctx: dict, module: Any, version: int) -> WeightTicket:
        import torch
        from torch.multiprocessing.reductions import reduce_tensor

        if not torch.cuda.is_available():
            raise RuntimeError("cuda_ipc weight sync needs CUDA")
        sd = module.state_dict()
        names = sorted(sd)
        snapshot = [sd[n].detach().to("cuda").clone() for n in names]
        torch.cuda.synchronize()
        ctx["ipc_snapshot"] = snapshot  # keep the shared memory alive for the receivers
        handles = [reduce_tensor(t)[1] for t in snapshot]  # (rebuild args): plain handles and sizes
        return WeightTicket(int(version), "cuda_ipc", [names, handles])

    @staticmethod
    def receive(ctx: dict, module: Any, ticket: WeightTicket) -> int:
        import torch
        from torch.multiprocessing.reductions import rebuild_cuda_tensor

        names, handles = ticket.payload
        sd = module.state_dict()
        if names != sorted(sd):
            raise ValueError(f"weight sync v{ticket.version}: state dict keys differ")
        with torch.no_grad():
            for n, args in zip(names, handles, strict=True):
                sd[n].copy_(rebuild_cuda_tensor(*args))
        torch.cuda.synchronize()
        return int(ticket.version)


# ------------------------------------------------------------------------ driver-side helpers
def join_group(sender: Any, receivers: Any, use_cuda: bool = False, timeout_s: float = 60.0) -> None:
    """Form the collective sync group: sender rank 0 is sync rank 0, receiver rank i is i+1.

    NCCL cannot connect two ranks on the same GPU, so ``use_cuda`` needs the sender and every
    receiver on different accelerators (disaggregated or hybrid placement); collocated groups sync
    through the object store.
    """
    from rlinf_robot.errors import ConfigError

    world = 1 + receivers.world_size
    if use_cuda:
        infos = [
            sender.call_rank(0, "worker_info").wait_one(timeout_s),
            *receivers.call("worker_info").wait(timeout_s),
        ]
        devices = [i["cuda_visible_devices"] for i in infos]
        if len(set(devices)) != len(devices) or None in devices:
            raise ConfigError(
                f"collective weight sync over NCCL needs one distinct GPU per member, got "
                f"CUDA_VISIBLE_DEVICES {devices}; use backend 'object_store' for collocated groups"
            )
    addr, port = sender.call_rank(0, "weight_sync_open", world).wait_one(timeout_s)
    futures = [sender.call_rank(0, "weight_sync_join", addr, port, 0, world, use_cuda)]
    futures += [
        receivers.call_rank(i, "weight_sync_join", addr, port, i + 1, world, use_cuda)
        for i in range(receivers.world_size)
    ]
    for f in futures:
        f.wait(timeout_s)


def push_weights(
    sender: Any, receivers: Any, version: int, backend_name: str = "object_store", timeout_s: float = 120.0
) -> list[int]:
    """Sender rank 0 publishes ``version``; every receiver loads it. Returns the versions they hold."""
    return backend(backend_name).push(sender, receivers, int(version), timeout_s)
