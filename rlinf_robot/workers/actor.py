"""The learner: ``ActorTrainer`` (one training step under torch.distributed) and ``ActorWorker``
(the same trainer as a scheduler ``Worker``, one Ray actor per rank).

Each rank holds a full copy of the policy before wrapping (same seed everywhere), then a
``TrainStrategy`` from the registry in ``workers.distributed`` (``trainer.strategy`` names it):
  ``fsdp``  FSDP2 ``fully_shard`` (each transformer block from ``_no_split_modules``, then the root);
  ``ddp``   replicas under torch's ``DistributedDataParallel``;   ``none``  a single process.
A step takes this rank's shard of the global batch, splits it into micro-batches, accumulates
gradients with the collective sync only on the last micro-batch, clips and steps. Every micro-batch
loss is weighted by its share of the shard, so N ranks x M micro-batches give the gradient of the
global-batch mean: the 2-rank result equals the 1-rank one on the same global batch.

Checkpoints are pickle-free: ``model.safetensors`` and ``optimizer.safetensors`` (full, unsharded
tensors, so any world size can resume) plus ``trainer.json`` (step, optimizer hyper-parameters).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from rlinf_robot.errors import ConfigError
from rlinf_robot.scheduler.worker import Worker
from rlinf_robot.workers.checkpoint import flatten_optimizer, replace_dir, unflatten_optimizer
from rlinf_robot.workers.distributed import TrainStrategy, get_strategy


@dataclass
class TrainerConfig:
    lr: float = 3e-4
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    micro_batch_size: int | None = None  # None: the whole shard at once
    strategy: str = "auto"  # a registered TrainStrategy; auto: fsdp when world_size > 1, else none

    def __post_init__(self):
        if self.strategy != "auto":
            get_strategy(self.strategy)  # unknown name: ConfigError listing the known ones
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            raise ConfigError(f"trainer.micro_batch_size must be >= 1, got {self.micro_batch_size}")
        if not self.lr > 0:
            raise ConfigError(f"trainer.lr must be > 0, got {self.lr}")


# ------------------------------------------------------------------ batches
def batch_len(batch: dict) -> int:
    """The rows of a (nested) batch: the length of its first non-empty tensor or list (an empty
    ``images`` dict beside them has none)."""
    for v in batch.values():
        if isinstance(v, dict):
            try:
                return batch_len(v)
            except ValueError:
                continue
        if isinstance(v, (Tensor, list)) and len(v):
            return len(v)
    raise ValueError("batch has no non-empty field to take its length from")


def slice_batch(batch: Any, sl: slice) -> Any:
    """Rows ``sl`` of every tensor / list in a (nested) batch; other values pass through."""
    if isinstance(batch, dict):
        return {k: slice_batch(v, sl) for k, v in batch.items()}
    if isinstance(batch, (Tensor, list)) and len(batch):
        return batch[sl]
    return batch


def _take_rows(batch: Any, idx: Tensor) -> Any:
    """Rows ``idx`` of every tensor / array / list in a (nested) batch; other values pass through."""
    if isinstance(batch, dict):
        return {k: _take_rows(v, idx) for k, v in batch.items()}
    if isinstance(batch, Tensor) and batch.ndim:
        return batch[idx]
    if hasattr(batch, "shape") and getattr(batch, "ndim", 0):
        return batch[idx.numpy()]
    if isinstance(batch, list) and batch:
        return [batch[i] for i in idx.tolist()]
    return batch


def shard_batch(batch: dict, rank: int, world_size: int) -> dict:
    """This rank's equal share of a global batch (its size must divide by the world size)."""
    B = batch_len(batch)
    if B % world_size:
        raise ValueError(f"global batch {B} does not split evenly over {world_size} ranks")
    n = B // world_size
    return slice_batch(batch, slice(rank * n, (rank + 1) * n))


# ------------------------------------------------------------------ trainer
class _PolicyView:
    """What an objective sees: calling it runs the (wrapped) module, so gradients sync; attributes
    (``normalize_actions``, ``raw_from_normalized``, ...) come from the policy itself (a method that
    runs parameters, such as ``value``, bypasses the wrapper: compute what you backprop through in
    the one call)."""

    def __init__(self, wrapped: nn.Module, policy: nn.Module):
        self._wrapped, self._policy = wrapped, policy

    def __call__(self, *args, **kwargs):
        return self._wrapped(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._policy, name)


class ActorTrainer:
    """``trainer.train_step(shard)`` minimises ``objective(policy, micro_batch, **objective_cfg)``.

    ``strategy`` is the resolved strategy's name (``"auto"`` becomes ``"fsdp"`` or ``"none"``),
    ``parallel`` the ``TrainStrategy`` object, ``module`` what it wrapped the policy into.
    """

    def __init__(
        self,
        policy: nn.Module,
        objective: str | Callable,
        cfg: TrainerConfig | None = None,
        objective_cfg: dict | None = None,
        device: str = "cpu",
    ):
        from rlinf_robot.algorithms import get_objective

        self.cfg = cfg or TrainerConfig()
        self.objective = get_objective(objective) if isinstance(objective, str) else objective
        self.objective_cfg = dict(objective_cfg or {})
        self.distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        self.rank = dist.get_rank() if self.distributed else 0
        self.world_size = dist.get_world_size() if self.distributed else 1
        name = self.cfg.strategy
        if name == "auto":
            name = "fsdp" if self.distributed else "none"
        self.parallel: TrainStrategy = get_strategy(name)
        if self.parallel.needs_process_group and not self.distributed:
            raise ConfigError(f"trainer.strategy={name!r} needs an initialized process group of > 1 rank")
        self.strategy = name
        self.policy = policy.to(device)
        self.module = self.parallel.wrap(self.policy, device)
        self.view = _PolicyView(self.module, self.policy)
        self._params = [p for p in self.module.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self._params, lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)
        self.step = 0

    def train_step(
        self, shard: dict, objective: str | None = None, objective_cfg: dict | None = None
    ) -> dict[str, float]:
        """One optimizer step on this rank's shard (the same size on every rank). ``objective``: a
        registry name used for this step instead of the trainer's own (the job's warm start clones
        demonstrations with ``sft`` into a PPO actor)."""
        fn, kw = self.objective, self.objective_cfg
        if objective is not None:
            from rlinf_robot.algorithms import get_objective

            fn, kw = get_objective(objective), dict(objective_cfg or {})
        self.module.train()
        B = batch_len(shard)
        mb = self.cfg.micro_batch_size or B
        n_micro = math.ceil(B / mb)
        totals: dict[str, float] = {}
        for i in range(n_micro):
            sl = slice(i * mb, min((i + 1) * mb, B))
            weight = (sl.stop - sl.start) / B
            with self.parallel.sync_context(self.module, sync=i == n_micro - 1):
                loss, stats = fn(self.view, slice_batch(shard, sl), **kw)
                (loss * weight).backward()
            for k, v in {"loss": loss, **stats}.items():
                totals[k] = totals.get(k, 0.0) + weight * float(v.detach() if isinstance(v, Tensor) else v)
        # without a bound (max_grad_norm None) an infinite one only measures the norm, so the
        # non-finite check below holds whether or not the gradient is clipped
        bound = math.inf if self.cfg.max_grad_norm is None else self.cfg.max_grad_norm
        norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), bound)
        totals["grad_norm"] = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        # the norm is global (DDP's reduced gradients, FSDP's full norm), so every rank skips alike
        skipped = 0.0 if math.isfinite(totals["grad_norm"]) else 1.0
        if not skipped:  # a non-finite gradient would write NaN into every weight: drop the step
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        totals["nonfinite_skipped"] = skipped
        self.step += 1
        if self.distributed:  # report the global mean, not rank 0's shard
            keys = sorted(k for k in totals if k != "grad_norm")
            vec = torch.tensor([totals[k] for k in keys], dtype=torch.float64)
            dist.all_reduce(vec)
            totals.update({k: float(v) / self.world_size for k, v in zip(keys, vec, strict=True)})
        totals["step"] = self.step
        return totals

    # -------------------------------------------------------------- checkpoints
    def full_state(self) -> tuple[dict[str, Tensor], dict]:
        """Unsharded model and optimizer state dicts on CPU, on rank 0 (other ranks get empty dicts;
        a collective under FSDP: every rank calls it)."""
        return self.parallel.full_state(self.module, self.optimizer)

    def save_checkpoint(self, path: str | Path) -> None:
        """Every rank calls it; rank 0 writes. Atomic: files go to ``path.tmp`` then rename."""
        from safetensors.torch import save_file

        model_sd, optim_sd = self.full_state()
        path = Path(path)
        if self.rank == 0:
            tmp = path.with_name(path.name + ".tmp")
            tmp.mkdir(parents=True, exist_ok=True)
            save_file({k: v.contiguous() for k, v in model_sd.items()}, str(tmp / "model.safetensors"))
            tensors, groups = flatten_optimizer(optim_sd)
            save_file(tensors, str(tmp / "optimizer.safetensors"))
            meta = {
                "format": 1,
                "step": self.step,
                "param_groups": groups,
                "world_size": self.world_size,
                "strategy": self.strategy,
            }
            (tmp / "trainer.json").write_text(json.dumps(meta, indent=2))
            replace_dir(tmp, path)
        if self.distributed:
            dist.barrier()

    def load_checkpoint(self, path: str | Path) -> None:
        """Every rank reads the full state and keeps its shard (any saved world size works)."""
        from safetensors.torch import load_file
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        path = Path(path)
        meta = json.loads((path / "trainer.json").read_text())
        model_sd = load_file(str(path / "model.safetensors"))
        optim_sd = unflatten_optimizer(load_file(str(path / "optimizer.safetensors")), meta["param_groups"])
        set_model_state_dict(self.module, model_sd, options=StateDictOptions(full_state_dict=True))
        # Parameters that never had a gradient (e.g. the value head under behaviour cloning) have no
        # optimizer state yet: not strict there, strict for the weights.
        set_optimizer_state_dict(
            self.module,
            self.optimizer,
            optim_sd,
            options=StateDictOptions(full_state_dict=True, strict=False),
        )
        # ...and torch fills such parameters with a zero state at step 1, which would change their
        # first Adam update (bias correction): drop it, as if never stepped, like before the save.
        # (The policy's names: a DDP wrapper would prefix them with "module.".)
        for name, p in self.policy.named_parameters():
            if name not in optim_sd["state"]:
                self.optimizer.state.pop(p, None)
        self.step = int(meta["step"])


# ------------------------------------------------------------------ Ray worker
class _FullWeights:
    """What weight sync reads on rank 0: the unsharded weights gathered by ``gather_weights``."""

    def __init__(self, trainer: ActorTrainer):
        self.trainer = trainer
        self.cached: dict[str, Tensor] | None = None

    def state_dict(self) -> dict[str, Tensor]:
        if self.trainer.parallel.sharded:
            if self.cached is None:
                raise RuntimeError("call gather_weights() on every actor rank before publishing FSDP weights")
            return self.cached
        return self.trainer.policy.state_dict()


class ActorWorker(Worker):
    """An ``ActorTrainer`` per rank of a scheduler ``WorkerGroup``; the group is one torch.distributed job.

    ``policy`` / ``objective`` are registry names. The group's rendezvous address is only known after
    every rank is up, so the trainer is built by ``setup()`` (call it on the whole group once; the
    first ``train_step`` does it otherwise). Every rank seeds torch with ``seed`` first, so the full
    copies are identical before sharding. The driver sends the *global* batch (one ``ray.put``);
    each rank trains on its own shard.
    """

    def __init__(
        self,
        policy: str,
        policy_cfg: dict,
        objective: str,
        objective_cfg: dict | None = None,
        trainer: dict | None = None,
        seed: int = 0,
    ):
        super().__init__()
        self._spec = (
            policy,
            dict(policy_cfg),
            objective,
            dict(objective_cfg or {}),
            dict(trainer or {}),
            seed,
        )
        self.trainer: ActorTrainer | None = None
        self._weights: _FullWeights | None = None

    def setup(self) -> dict[str, Any]:
        """Join the group's process group and build policy, wrapper and optimizer (collective)."""
        if self.trainer is None:
            import policies
            from rlinf_robot.workers.distributed import init_from_env

            name, policy_cfg, objective, objective_cfg, trainer_cfg, seed = self._spec
            init_from_env()
            torch.manual_seed(seed)
            self.trainer = ActorTrainer(
                policies.make(name, **policy_cfg),
                objective,
                TrainerConfig(**trainer_cfg),
                objective_cfg,
                device=self.device,
            )
            self._weights = _FullWeights(self.trainer)
            self.register_offload(
                **self.trainer.parallel.offload_targets(self.trainer.policy, self.trainer.optimizer)
            )
        t = self.trainer
        return {
            "rank": t.rank,
            "world_size": t.world_size,
            "strategy": t.strategy,
            "step": t.step,
            "chunk_size": int(getattr(t.policy, "chunk_size", 1)),
        }

    def train_step(self, global_batch: dict) -> dict[str, float]:
        self.setup()
        with self.timeline.span("train_step"):
            shard = shard_batch(global_batch, self.trainer.rank, self.trainer.world_size)
            return self.trainer.train_step(shard)

    def train_epochs(
        self,
        global_batch: dict,
        epochs: int,
        minibatch_size: int,
        seed: int,
        target_kl: float | None = None,
        objective: str | None = None,
        objective_cfg: dict | None = None,
    ) -> dict[str, float]:
        """``epochs`` passes over ``global_batch`` in shuffled minibatches of ``minibatch_size`` rows
        (the last partial one dropped), one ``train_step`` each: the usual PPO schedule, run here so
        the batch crosses to the actor once. The permutation comes from ``seed``, so the same batch
        and seed give the same update (bit for bit, on one rank). Stops after an epoch whose mean
        ``approx_kl`` (when the objective reports it) passes ``target_kl``. ``objective``: another
        registry objective for these steps (``train_step``). Returns the last step's statistics plus
        ``epochs`` run and ``updates`` (optimizer steps)."""
        self.setup()
        total = batch_len(global_batch)
        mb = min(int(minibatch_size), total)
        mb -= mb % self.trainer.world_size
        if mb < self.trainer.world_size:
            raise ValueError(f"a batch of {total} rows cannot feed {self.trainer.world_size} ranks")
        gen = torch.Generator().manual_seed(int(seed))
        stats: dict[str, float] = {}
        done = updates = 0
        with self.timeline.span("train_epochs", rows=total):
            for _ in range(int(epochs)):
                perm = torch.randperm(total, generator=gen)
                kls = []
                for start in range(0, total - mb + 1, mb):
                    idx = perm[start : start + mb]
                    minibatch = _take_rows(global_batch, idx)
                    stats = self.trainer.train_step(
                        shard_batch(minibatch, self.trainer.rank, self.trainer.world_size),
                        objective,
                        objective_cfg,
                    )
                    updates += 1
                    if "approx_kl" in stats:
                        kls.append(stats["approx_kl"])
                done += 1
                if target_kl is not None and kls and sum(kls) / len(kls) > target_kl:
                    break
        return {**stats, "epochs": done, "updates": updates}

    @torch.no_grad()
    def evaluate(self, batch: dict) -> dict[str, Any]:
        """The current weights' outputs on ``batch`` (``obs``, optional ``raw_actions`` and
        ``noise_scale``): ``value`` and ``log_prob`` as numpy [B] (collective under a sharded
        strategy: call it on all ranks)."""
        self.setup()
        raw, scale = batch.get("raw_actions"), batch.get("noise_scale")
        if raw is not None:
            raw = torch.as_tensor(raw, dtype=torch.float32, device=self.device)
        if scale is not None:
            scale = torch.as_tensor(scale, dtype=torch.float32, device=self.device)
        out = self.trainer.view({"obs": batch["obs"], "raw_actions": raw, "noise_scale": scale})
        return {k: out[k].detach().cpu().numpy() for k in ("value", "log_prob") if out.get(k) is not None}

    def update_obs_norm(self, states: Any) -> None:
        """Feed the policy's observation normalizer (every rank the same states: the copies agree)."""
        self.setup()
        if hasattr(self.trainer.policy, "update_obs_norm"):
            self.trainer.policy.update_obs_norm(states)

    def step_count(self) -> int:
        self.setup()
        return self.trainer.step

    def save_checkpoint(self, path: str) -> None:
        self.setup()
        self.trainer.save_checkpoint(path)

    def load_checkpoint(self, path: str) -> int:
        self.setup()
        self.trainer.load_checkpoint(path)
        return self.trainer.step

    def gather_weights(self) -> int:
        """Collective: refresh the unsharded copy that ``publish_weights`` sends (sharded strategies;
        a replicated policy is read directly)."""
        self.setup()
        if self.trainer.parallel.sharded:
            self._weights.cached = self.trainer.full_state()[0]
        return self.trainer.step

    def full_state_dict(self) -> dict[str, Tensor]:
        """Collective: the unsharded model weights on rank 0 (the other ranks return an empty dict)."""
        self.setup()
        return self.trainer.full_state()[0]

    def weights_module(self) -> _FullWeights:
        self.setup()
        return self._weights

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
        super().close()
