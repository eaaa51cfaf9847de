"""``RolloutWorker``: policy inference for env workers, with versioned weights from the actor.

It composes a policy from the registry (``policies.make(name, action_spec=..., state_dim=...)``)
and serves ``infer(obs)`` calls; each answer carries the version of the weights that produced it,
so every rollout step records which policy acted. Weights arrive via ``load_weights`` (see
``rlinf_robot.scheduler.weight_sync``); in collocated placement the worker offloads its policy while
the actor trains.
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import numpy as np

from rlinf_robot.scheduler.pipeline import stage_bounds
from rlinf_robot.scheduler.worker import Worker
from rlinf_robot.workers.sim_env import action_spec_from_dict


class RolloutWorker(Worker):
    def __init__(
        self,
        action_spec: dict[str, Any],
        state_dim: int,
        policy: str = "mlp",
        policy_kwargs: dict[str, Any] | None = None,
        seed: int = 0,
        obs_spec: Any = None,
    ):
        super().__init__()
        import torch

        import policies

        torch.manual_seed(int(seed))  # same initial weights on every rank (version -1)
        # the env's ObsSpec when given (policies that read images or name state fields need it)
        shape = {"obs_spec": obs_spec} if obs_spec is not None else {"state_dim": int(state_dim)}
        self.policy = policies.make(
            policy,
            action_spec=action_spec_from_dict(action_spec),
            **shape,
            **dict(policy_kwargs or {}),
        )
        self.policy.to(self.device).eval()
        self.register_offload(policy=self.policy)
        self._torch = torch
        # The policy is used from Ray calls and from the link thread: one at a time.
        self._lock = threading.RLock()
        self._link = None
        # Observations arrive as read-only views of Ray's shared memory; the policy only reads them.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

    def weights_module(self) -> Any:
        return self.policy

    def infer(self, obs: dict[str, Any], deterministic: bool = True, stage: int = 0) -> dict[str, Any]:
        """Actions ``[n, H, A]`` for a batch of observations, plus the weights version used and the
        seconds the policy took (``infer_s``: the caller's wait minus this is transport and queueing)."""
        with (
            self._lock,
            self.timeline.span("infer", stage=stage, n=len(obs["state"])),
            self._torch.inference_mode(),
        ):
            t0 = time.perf_counter()
            out = self.policy.predict_action_batch(obs, deterministic=deterministic)
            infer_s = time.perf_counter() - t0
        result = {"actions": out.actions, "version": self.weights_version, "infer_s": infer_s}
        if out.raw_actions is not None:
            result["raw_actions"] = out.raw_actions.detach().cpu().numpy()
        if out.log_prob is not None:
            result["log_prob"] = out.log_prob.detach().cpu().numpy()
        if out.value is not None:
            result["value"] = out.value.detach().cpu().numpy()
        return result

    # ---------------------------------------------------------------- the direct link
    def open_link(self) -> str:
        """Serve ``infer`` over a ZeroMQ link too (see ``scheduler.link``); returns its address."""
        if self._link is None:
            import ray

            from rlinf_robot.scheduler.link import LinkServer

            self._link = LinkServer(self._serve_link, host=ray.util.get_node_ip_address())
        return self._link.address

    def _serve_link(self, arrays: dict[str, Any], meta: dict[str, Any]) -> tuple[dict, dict]:
        obs = {
            "state": arrays["state"],
            "images": arrays.get("images", {}),
            "instruction": list(meta.get("instruction", [])),
        }
        out = self.infer(obs, bool(meta.get("deterministic", True)), int(meta.get("stage", 0)))
        version, infer_s = out.pop("version"), out.pop("infer_s")
        return out, {"version": version, "infer_s": infer_s}

    # Weight and memory changes must not interleave with an inference on the link thread.
    def load_weights(self, ticket: Any) -> int:
        with self._lock:
            return super().load_weights(ticket)

    def offload(self) -> dict[str, float]:
        with self._lock:
            return super().offload()

    def onload(self) -> dict[str, float]:
        with self._lock:
            return super().onload()

    def close(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    def stress(
        self, obs: dict[str, Any], num_calls: int = 0, stages: int = 1, seconds: float = 0.0
    ) -> dict[str, float]:
        """The inference workload alone: batches cut into ``stages`` parts, at least ``num_calls``
        and for at least ``seconds`` (for the parallel-ceiling measurement; no env, no waiting)."""
        n = len(obs["state"])
        parts = [
            {
                "state": obs["state"][a:b],
                "images": {c: v[a:b] for c, v in (obs.get("images") or {}).items()},
                "instruction": list(obs.get("instruction", []))[a:b],
            }
            for a, b in stage_bounds(n, stages)
        ]
        t0 = time.time()
        batches = 0
        with self._lock, self._torch.inference_mode():
            while batches < num_calls or time.time() - t0 < seconds:
                for p in parts:
                    self.policy.predict_action_batch(p, deterministic=True)
                batches += 1
        return {"start": t0, "end": time.time(), "batches": batches, "calls": batches * stages}

    def state_checksum(self) -> float:
        """Sum of all weights (a cheap way for tests to see that a sync or onload landed)."""
        return float(
            sum(
                p.detach().double().sum().item()
                for p in self.policy.state_dict().values()
                if p.is_floating_point()
            )
        )

    def numpy_state(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().copy() for k, v in self.policy.state_dict().items()}
