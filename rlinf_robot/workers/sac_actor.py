"""``SACActorWorker``: the off-policy learner of a training job (SAC / RLPD), one process.

It owns what an off-policy learner keeps between updates: the tanh-squashed policy, the critic
ensemble and its target copy, the temperature, their three optimizers (``SACLearner``) and two
replays, one per kind of source: ``sim`` (the sim envs' transitions) and ``real`` (the arms'). Each
gradient step samples ``real_share`` of its batch from the real replay and the rest from the sim
one (RLPD's symmetric sampling at 0.5), so scarce real transitions weigh what the job configured
however many sim transitions arrive beside them. A third replay, ``demo``, holds the transitions an
operator took over (teleop; they are in ``real`` as well, as HIL-SERL keeps interventions in both
its online and its demonstration buffer), and ``demo_share`` of each batch comes from it. The real replay can be warm-started with sim
transitions (``add(..., "real")`` of sim data), as online RL on real arms does before its first
real episode.

Weights go to the rollout and real workers through the scheduler's weight sync
(``weights_module`` is the policy); checkpoints are safetensors and JSON only (no pickle).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlinf_robot.scheduler.worker import Worker

#: The fields of one transition (raw action: the policy's normalized, squashed action chunk, flat)
TRANSITION_KEYS = ("state", "action", "reward", "next_state", "done")
_MODULES = ("policy", "critic", "target")
_OPTIMIZERS = ("actor_opt", "critic_opt", "alpha_opt")


class SACActorWorker(Worker):
    def __init__(
        self,
        policy: str,
        policy_cfg: dict,
        sac: dict | None = None,
        seed: int = 0,
        sim_capacity: int = 200_000,
        real_capacity: int = 200_000,
    ):
        super().__init__()
        import policies
        from rlinf_robot.algorithms.buffers import ReplayBuffer
        from rlinf_robot.algorithms.loops.sac_loop import SACConfig, SACLearner

        torch.manual_seed(seed)
        self.policy = policies.make(policy, **policy_cfg)
        if not getattr(self.policy, "squash", False):
            raise ValueError("SAC trains a tanh-squashed policy: set policy.kwargs.squash=true")
        cfg = SACConfig(**{k: (tuple(v) if k == "critic_hidden" else v) for k, v in (sac or {}).items()})
        state_dim = policy_cfg.get("state_dim") or int(np.prod(policy_cfg["obs_spec"].state_shape))
        self.learner = SACLearner(self.policy, cfg, int(state_dim))
        self.replays = {
            "sim": ReplayBuffer(sim_capacity),
            "real": ReplayBuffer(real_capacity),
            "demo": ReplayBuffer(real_capacity),
        }
        self.generator = torch.Generator().manual_seed(seed)
        self.actor_updates = 0

    # ------------------------------------------------------------------ data
    def add(self, transitions: dict[str, Any], kind: str) -> dict[str, int]:
        """Append transitions (``TRANSITION_KEYS``, numpy or tensors, leading dim n) to the ``sim``,
        ``real`` or ``demo`` replay. Returns the replays' sizes."""
        if kind not in self.replays:
            raise ValueError(f"replay kind must be one of {sorted(self.replays)}, got {kind!r}")
        missing = set(TRANSITION_KEYS) - set(transitions)
        if missing:
            raise ValueError(f"transitions lack {sorted(missing)}")
        batch = {k: torch.as_tensor(np.asarray(transitions[k]), dtype=torch.float32) for k in TRANSITION_KEYS}
        if len(batch["reward"]):
            self.replays[kind].add(**batch)
        return self.sizes()

    def warm_start(self, n: int) -> dict[str, int]:
        """Copy the newest ``n`` sim transitions into an empty real replay (before the first real
        episode: the real share of a batch is then not a handful of transitions repeated; a
        resumed or seeded real replay is left as it is). Returns the sizes and ``warm``, the
        transitions copied (fewer than ``n`` when the sim replay holds fewer)."""
        warm = 0
        if n > 0 and len(self.replays["sim"]) and not len(self.replays["real"]):
            self.replays["real"].add(**self.replays["sim"].latest(n))
            warm = len(self.replays["real"])
        return {**self.sizes(), "warm": warm}

    def sizes(self) -> dict[str, int]:
        return {k: len(b) for k, b in self.replays.items()}

    # ------------------------------------------------------------------ learning
    def train(
        self, updates: int, real_share: float, seed: int | None = None, demo_share: float = 0.0
    ) -> dict[str, float]:
        """``updates`` critic steps (the actor and temperature every ``actor_delay``-th), each on a
        batch with ``real_share`` of its rows from the real replay (none while it is empty) and
        ``demo_share`` from the interventions' replay (none while it is empty).
        ``seed`` re-seeds the sampling and the policy's noise (torch's global generator), so the
        same data and seed give the same update bit for bit (a resumed run's next update)."""
        from rlinf_robot.algorithms.rlpd import share_sample

        if seed is not None:
            self.generator.manual_seed(int(seed))
            torch.manual_seed(int(seed))

        stats: dict[str, float] = {}
        real_rows = rows = demo_rows = 0
        sim, real, demo = self.replays["sim"], self.replays["real"], self.replays["demo"]
        size = self.learner.cfg.batch_size
        n_demo = min(int(round(demo_share * size)), size - 1) if len(demo) else 0
        if not len(sim) and not len(real):
            return {"critic_updates": 0}
        main, other, share = (sim, real, real_share) if len(sim) else (real, sim, 0.0)
        with self.timeline.span("train", updates=int(updates)):
            for _ in range(int(updates)):
                batch, n_other = share_sample(main, other, size - n_demo, share, self.generator)
                if n_demo:
                    extra = demo.sample(n_demo, self.generator)
                    batch = {k: torch.cat([batch[k], extra[k]], dim=0) for k in batch}
                    demo_rows += n_demo
                stats = self.learner.update(batch, self.generator)
                self.actor_updates += int("actor_loss" in stats)
                real_rows += n_other if main is sim else len(batch["reward"])
                rows += len(batch["reward"])
        return {
            **stats,
            "critic_updates": int(updates),
            "total_critic_updates": self.learner.updates,
            "total_actor_updates": self.actor_updates,
            "real_share": real_rows / max(rows, 1),
            "demo_share": demo_rows / max(rows, 1),
            "sim_replay": len(sim),
            "real_replay": len(real),
            "demo_replay": len(demo),
        }

    def step_count(self) -> int:
        return self.learner.updates

    # ------------------------------------------------------------------ weights
    def weights_module(self):
        return self.policy

    def gather_weights(self) -> int:
        """Nothing to gather (one process); the same call as ``ActorWorker``'s for the job."""
        return self.learner.updates

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path: str) -> None:
        """Policy, critics, target critics, temperature and the three optimizers, as safetensors +
        JSON, written to ``path.tmp`` and renamed (the replays are the job's: real episodes are on
        disk already, sim transitions are re-collected)."""
        from safetensors.torch import save_file

        from rlinf_robot.workers.checkpoint import flatten_optimizer, replace_dir

        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        L = self.learner
        for name, module in zip(_MODULES, (L.policy, L.critic, L.target), strict=True):
            save_file(
                {k: v.contiguous() for k, v in module.state_dict().items()}, str(tmp / f"{name}.safetensors")
            )
        groups = {}
        for name in _OPTIMIZERS:
            tensors, groups[name] = flatten_optimizer(getattr(L, name).state_dict())
            save_file(tensors, str(tmp / f"{name}.safetensors"))
        meta = {
            "format": 1,
            "step": L.updates,
            "actor_updates": self.actor_updates,
            "log_alpha": float(L.log_alpha.detach()),
            "param_groups": groups,
        }
        (tmp / "sac.json").write_text(json.dumps(meta, indent=2))
        replace_dir(tmp, path)

    def load_checkpoint(self, path: str) -> int:
        from safetensors.torch import load_file

        from rlinf_robot.workers.checkpoint import unflatten_optimizer

        path = Path(path)
        meta = json.loads((path / "sac.json").read_text())
        L = self.learner
        for name, module in zip(_MODULES, (L.policy, L.critic, L.target), strict=True):
            module.load_state_dict(load_file(str(path / f"{name}.safetensors")))
        with torch.no_grad():
            L.log_alpha.fill_(meta["log_alpha"])
        for name in _OPTIMIZERS:
            sd = unflatten_optimizer(load_file(str(path / f"{name}.safetensors")), meta["param_groups"][name])
            sd["state"] = {int(k): v for k, v in sd["state"].items()}  # torch keys params by index
            getattr(L, name).load_state_dict(sd)
        L.updates = int(meta["step"])
        self.actor_updates = int(meta["actor_updates"])
        return L.updates

    def parameters_digest(self) -> dict[str, float]:
        """Sums of every module's parameters (tests compare two learners with it)."""
        L = self.learner
        return {
            name: float(sum(p.detach().double().sum() for p in m.parameters()))
            for name, m in zip(_MODULES, (L.policy, L.critic, L.target), strict=True)
        }


def transitions_from_trajectory(traj: dict[str, Any]) -> dict[str, np.ndarray]:
    """A sim rollout ``[T, N]`` (``SimEnvWorker.rollout`` with ``collect``) -> flat transitions. The
    next state of a step that ended an episode is the state that ended it (``final_states``); the
    target bootstraps through truncations and stops at terminations."""
    T, N = traj["rewards"].shape
    ended = traj["terminated"] | traj["truncated"]
    nxt = np.where(ended[..., None], traj["final_states"], traj["states"][1:])
    return {
        "state": traj["states"][:-1].reshape(T * N, -1),
        "action": traj["raw_actions"].reshape(T * N, -1),
        "reward": traj["rewards"].reshape(T * N).astype(np.float32),
        "next_state": nxt.reshape(T * N, -1),
        "done": traj["terminated"].reshape(T * N).astype(np.float32),
    }


def transitions_from_episode(ep: dict[str, Any]) -> dict[str, np.ndarray]:
    """One real episode -> transitions: ``states[t] -> states[t+1]``, the last to ``final_state``."""
    n = len(ep["rewards"])
    nxt = np.concatenate([ep["states"][1:n], np.asarray(ep["final_state"])[None]])
    return {
        "state": ep["states"][:n],
        "action": ep["raw_actions"].reshape(n, -1),
        "reward": ep["rewards"].astype(np.float32),
        "next_state": nxt,
        "done": ep["terminated"].astype(np.float32),
    }
