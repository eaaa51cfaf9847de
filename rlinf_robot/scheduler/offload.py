"""Offload / onload: move model and optimizer state to host memory and back, bit-exactly.

Collocated placement time-slices one accelerator between groups (rollout, then training); the idle
group offloads so the active one has the memory. Each tensor is copied to host memory (pinned when
it lives on CUDA, so the copy back is fast) and its device storage is released by pointing the
parameter at an empty tensor: the ``nn.Parameter`` objects stay the same, so optimizer state keyed
by them stays valid, and a forward pass while offloaded fails loudly instead of using stale data.

On a CPU-only worker the "device" is host memory too: the state moves into the offload buffers and
comes back unchanged (the mechanism is the same; the memory saving only exists on accelerators).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class OffloadedState:
    """Host copies of every offloaded tensor, keyed by (target name, slot)."""

    tensors: dict[tuple[str, str], Any] = field(default_factory=dict)
    nbytes: int = 0


def _slots(name: str, target: Any) -> Iterator[tuple[str, Any, str]]:
    """Yield (slot, owner, attribute) for every tensor of a module (params, buffers) or optimizer."""
    import torch

    if isinstance(target, torch.nn.Module):
        seen: set[int] = set()  # tied weights: one Parameter registered in two modules
        for mod_name, mod in target.named_modules():
            for pname, p in list(mod._parameters.items()):
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield f"{mod_name}.{pname}", p, "param"
            for bname, b in list(mod._buffers.items()):
                if b is not None:
                    yield f"{mod_name}.{bname}", (mod, bname), "buffer"
    elif isinstance(target, torch.optim.Optimizer):
        for i, (param, state) in enumerate(target.state.items()):
            del param
            for key, value in state.items():
                if torch.is_tensor(value):
                    yield f"state{i}.{key}", (state, key), "state"
    else:
        raise TypeError(
            f"offload target {name!r} is a {type(target).__name__}; expected an nn.Module or "
            "torch.optim.Optimizer"
        )


def _get(owner: Any, kind: str) -> Any:
    if kind == "param":
        return owner.data
    container, key = owner
    return container._buffers[key] if kind == "buffer" else container[key]


def _set(owner: Any, kind: str, value: Any) -> None:
    if kind == "param":
        owner.data = value
    elif kind == "buffer":
        container, key = owner
        container._buffers[key] = value
    else:
        container, key = owner
        container[key] = value


def offload_state(targets: Mapping[str, Any]) -> OffloadedState:
    """Copy every tensor of ``targets`` to host memory and release its device storage."""
    import torch

    out = OffloadedState()
    for name, target in targets.items():
        for slot, owner, kind in _slots(name, target):
            t = _get(owner, kind)
            if t.is_cuda:
                host = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=True)
                host.copy_(t, non_blocking=True)
            else:
                host = t.detach().clone()
            out.tensors[(name, slot)] = host
            out.nbytes += t.numel() * t.element_size()
            _set(owner, kind, torch.empty(0, dtype=t.dtype, device=t.device))
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return out


def onload_state(state: OffloadedState, targets: Mapping[str, Any], device: str) -> int:
    """Put every offloaded tensor back on ``device``; returns the bytes moved."""
    import torch

    moved = 0
    for name, target in targets.items():
        for slot, owner, kind in _slots(name, target):
            host = state.tensors.pop((name, slot), None)
            if host is None:
                raise KeyError(f"{name}:{slot} was not offloaded (state changed while offloaded?)")
            value = host.to(device, non_blocking=True) if device != "cpu" else host
            _set(owner, kind, value)
            moved += host.numel() * host.element_size()
    if state.tensors:
        raise KeyError(f"offloaded tensors without a target: {sorted(state.tensors)[:5]}")
    if device != "cpu" and torch.cuda.is_available():
        torch.cuda.synchronize()
    return moved
