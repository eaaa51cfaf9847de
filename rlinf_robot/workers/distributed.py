"""torch.distributed for learner processes, with or without Ray: joining a process group, local
ranks, and the data-parallel strategies a trainer uses over the group.

``init_from_env()`` joins the process group described by ``RANK`` / ``WORLD_SIZE`` / ``MASTER_ADDR`` /
``MASTER_PORT`` (what torchrun, ``spawn`` below and the scheduler's ``WorkerGroup`` all set): NCCL
when CUDA is there, gloo otherwise. ``spawn(fn, world_size, *args)`` runs ``fn(rank, world_size,
*args)`` in ``world_size`` local processes on 127.0.0.1, the standalone way to train on one machine.
``get_strategy(name)`` gives a ``TrainStrategy`` (``none``, ``ddp``, ``fsdp``; a registry): how a
policy is wrapped, when its gradients cross ranks, and how its full state is read back.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def init_from_env(backend: str | None = None, timeout_s: float = 120.0) -> bool:
    """Join the default process group if the env describes one with more than one rank.

    Returns True when a process group is (now) initialized.
    """
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return True
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return False
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    dist.init_process_group(
        backend,
        rank=int(os.environ["RANK"]),
        world_size=world,
        init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
        timeout=timedelta(seconds=timeout_s),
    )
    return True


def _entry(rank: int, fn: Callable, world_size: int, port: int, args: tuple) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    import torch.distributed as dist

    init_from_env()
    try:
        fn(rank, world_size, *args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def spawn(fn: Callable, world_size: int, *args, timeout_s: float = 300.0) -> None:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` local ranks (gloo/NCCL on 127.0.0.1).

    ``fn`` must be importable (a module-level function). Raises if any rank fails or times out.
    """
    import torch.multiprocessing as mp

    ctx = mp.start_processes(
        _entry, args=(fn, world_size, free_port(), args), nprocs=world_size, join=False, start_method="spawn"
    )
    import time

    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
            raise TimeoutError(f"distributed job did not finish within {timeout_s} s")


# ------------------------------------------------------------------ data-parallel strategies
class TrainStrategy:
    """How ``ActorTrainer`` spreads one policy over the ranks of a process group.

    One class per strategy, registered by name (``trainer.strategy`` in a config), so the trainer
    never branches on the name. The hooks, in the order the trainer uses them:

    - ``wrap(policy, device)``: the module the trainer runs (every rank starts from the same weights);
    - ``sync_context(module, sync)``: entered around each micro-batch's forward + backward, with
      ``sync`` True only on the last one, so gradients cross ranks once per optimizer step;
    - ``full_state(module, optimizer)``: the unsharded model and optimizer state on CPU, on rank 0
      (a collective where parameters are sharded: every rank must call it);
    - ``offload_targets(policy, optimizer)``: what a collocated worker may move to host memory.

    ``sharded``: parameters are split over ranks, so reading the full weights (weight sync,
    checkpoints) is a collective. ``needs_process_group``: it only makes sense with > 1 rank.
    """

    name: str = ""
    needs_process_group: bool = True
    sharded: bool = False

    def wrap(self, policy: Any, device: str) -> Any:
        return policy

    def sync_context(self, module: Any, sync: bool) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def full_state(self, module: Any, optimizer: Any) -> tuple[dict, dict]:
        """torch's DCP ``get_state_dict`` reads FSDP2, DDP (FQNs without ``module.``) and plain
        modules alike; with ``cpu_offload`` only rank 0 gets the tensors, the others empty dicts."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_state_dict(module, optimizer, options=opts)

    def offload_targets(self, policy: Any, optimizer: Any) -> dict[str, Any]:
        return {"model": policy, "optim": optimizer}


_STRATEGIES: dict[str, type[TrainStrategy]] = {}


def register_strategy(name: str) -> Callable[[type[TrainStrategy]], type[TrainStrategy]]:
    def deco(cls: type[TrainStrategy]) -> type[TrainStrategy]:
        cls.name = name
        _STRATEGIES[name] = cls
        return cls

    return deco


def strategy_names() -> list[str]:
    return sorted(_STRATEGIES)


def get_strategy(name: str) -> TrainStrategy:
    """A new strategy object by name; an unknown name is a ``ConfigError`` listing the known ones."""
    from rlinf_robot.errors import ConfigError

    if name not in _STRATEGIES:
        raise ConfigError(f"trainer.strategy {name!r} unknown; known: {['auto', *strategy_names()]}")
    return _STRATEGIES[name]()


@register_strategy("none")
class SingleProcess(TrainStrategy):
    """One process: the policy itself, gradients stay local."""

    needs_process_group = False


@register_strategy("ddp")
class DDPStrategy(TrainStrategy):
    """Replicas under ``torch.nn.parallel.DistributedDataParallel``: parameters and buffers are
    broadcast from rank 0 when wrapped (buffers again before each forward), gradients are averaged
    by bucketed all-reduces that overlap the backward pass, and ``no_sync()`` keeps every
    micro-batch but the last one local.

    ``find_unused_parameters=True`` because a policy's ``forward`` returns mean, log-prob, entropy
    and value whatever the objective uses: behaviour cloning never touches the value head, GRPO and
    decoupled PPO neither. DDP documents this flag for exactly that case: after each forward it
    walks the autograd graph from the outputs and marks parameters that get no gradient - whether
    the forward skipped them or the loss did not use an output - as ready, so their buckets still
    reduce instead of waiting forever (without the flag, the bucket holding the value head is
    never reduced: that step's gradients stay local and the next forward raises "Expected to have
    finished reduction in the prior iteration"). The price is one graph traversal per forward. A parameter that no rank used keeps ``grad=None`` and the optimizer skips it, as in a
    single process. Rejected: ``static_graph=True`` (fails torch 2.13's reducer assertion
    ``expect_autograd_hooks_`` under ``no_sync()`` gradient accumulation) and making objectives add
    ``0 * output`` for what they ignore (backprop through unused heads, and every objective would
    have to know every policy's outputs). An objective must call the policy once per micro-batch
    through the view the trainer hands it; methods reached as attributes (``policy.value(...)``)
    run outside DDP and would not sync.
    """

    def wrap(self, policy: Any, device: str) -> Any:
        from torch.nn.parallel import DistributedDataParallel

        # device_ids=None: the policy moves its inputs to its own device (one device per rank).
        return DistributedDataParallel(policy, device_ids=None, find_unused_parameters=True)

    def sync_context(self, module: Any, sync: bool) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if sync else module.no_sync()


@register_strategy("fsdp")
class FSDPStrategy(TrainStrategy):
    """FSDP2 ``fully_shard``: each transformer block named in a module's ``_no_split_modules``, then
    the root, on a 1-D mesh over all ranks. Gradients are reduce-scattered only on the last
    micro-batch (``set_requires_gradient_sync``)."""

    sharded = True

    def wrap(self, policy: Any, device: str) -> Any:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(device, (dist.get_world_size(),))
        blocks = _no_split_classes(policy)
        for m in list(policy.modules()):
            if m is not policy and type(m).__name__ in blocks:
                fully_shard(m, mesh=mesh)
        fully_shard(policy, mesh=mesh)
        return policy

    @contextlib.contextmanager
    def sync_context(self, module: Any, sync: bool) -> Iterator[None]:
        module.set_requires_gradient_sync(sync)
        yield

    def offload_targets(self, policy: Any, optimizer: Any) -> dict[str, Any]:
        return {}  # DTensor shards are not moved by the generic offload hook (scheduler/offload.py)


def _no_split_classes(module: Any) -> set[str]:
    names: set[str] = set()
    for m in module.modules():
        names |= set(getattr(m, "_no_split_modules", None) or ())
    return names
