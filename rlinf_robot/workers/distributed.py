"""torch.distributed set-up for learner processes, with or without Ray.

``init_from_env()`` joins the process group described by ``RANK`` / ``WORLD_SIZE`` / ``MASTER_ADDR`` /
``MASTER_PORT`` (what torchrun, ``spawn`` below and the scheduler's ``WorkerGroup`` all set): NCCL
when CUDA is there, gloo otherwise. ``spawn(fn, world_size, *args)`` runs ``fn(rank, world_size,
*args)`` in ``world_size`` local processes on 127.0.0.1, the standalone way to train on one machine.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from datetime import timedelta


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
