"""Pickle-free optimizer state: tensors to safetensors, hyper-parameters to JSON.

``torch.save`` would pickle; a checkpoint must be loadable without executing anything, so the full
(unsharded) optimizer state dict is split into flat tensors named ``state/<param fqn>/<key>`` and
its ``param_groups`` (numbers, bools, lists of FQNs) as JSON.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor


def flatten_optimizer(optim_sd: dict) -> tuple[dict[str, Tensor], list[dict]]:
    """``{"state": {fqn: {k: v}}, "param_groups": [...]}`` -> (tensors "state/<fqn>/<k>", JSON groups)."""
    tensors = {}
    for fqn, st in optim_sd["state"].items():
        for k, v in st.items():
            tensors[f"state/{fqn}/{k}"] = torch.as_tensor(v).detach().cpu().contiguous()
    groups = [
        {k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in optim_sd["param_groups"]
    ]
    return tensors, groups


def unflatten_optimizer(tensors: dict[str, Tensor], groups: list[dict]) -> dict:
    state: dict[str, dict[str, Tensor]] = {}
    for key, v in tensors.items():
        _, rest = key.split("/", 1)
        fqn, k = rest.rsplit("/", 1)
        state.setdefault(fqn, {})[k] = v
    groups = [{k: (tuple(v) if k == "betas" else v) for k, v in g.items()} for g in groups]
    return {"state": state, "param_groups": groups}


def replace_dir(tmp: Path, path: Path) -> None:
    """Put the fully written checkpoint directory ``tmp`` in place of ``path`` (files only, as
    checkpoints are): a crash before the rename leaves the old checkpoint, never half a new one."""
    if path.exists():
        for f in path.iterdir():
            f.unlink()
        path.rmdir()
    tmp.rename(path)
