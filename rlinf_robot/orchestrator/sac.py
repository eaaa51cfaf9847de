"""The off-policy recipe of a training job: SAC, and RLPD with its ensemble (``algorithm=sac`` /
``algorithm=rlpd``).

Every update adds the sim rollout's transitions to the learner's sim replay and each real episode
that arrived (once, when it arrives) to its real replay, then runs ``utd`` critic updates per new
sim transition, each batch holding ``hybrid.real_fraction`` of its rows from the real replay
(RLPD's symmetric sampling at 0.5): every real transition is reused for as long as the run lasts,
where PPO can only reuse it for a few policy versions. The actor and temperature update every
``actor_delay``-th critic update (the critic/actor schedule). When real training starts the real
replay is warm-started with the newest ``warm_start_real`` sim transitions, so the first batches'
real share is not a handful of transitions repeated; real episodes then dilute them.

The learner is ``workers.sac_actor.SACActorWorker``; the job's weight pushes, checkpoints and
metrics are the same as PPO's.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlinf_robot.errors import ConfigError
from rlinf_robot.orchestrator.recipe import BatchInfo, JobRecipe, register_recipe
from rlinf_robot.settings import build, check, flag, integer, number, text


@dataclass(frozen=True)
class SACSettings:
    name: str = text("sac")
    num_steps: int = integer(4, 1)  # decisions per sim env per update
    batch_size: int = integer(256, 2)
    lr: float = number(1e-3, 0.0, lo_open=True)
    gamma: float = number(0.95, 0.0, 1.0, lo_open=True)
    tau: float = number(0.005, 0.0, 1.0, lo_open=True)
    utd: float = number(0.25, 0.0, lo_open=True)  # critic updates per new sim transition
    learning_starts: int = integer(
        1000, 0
    )  # sim transitions before a fresh learner's first update (not a resumed one's)
    num_critics: int = integer(2, 1)
    num_min: int = integer(2, 1)
    layer_norm: bool = flag(False)
    critic_hidden: list[int] = field(default_factory=lambda: [128, 128])
    init_alpha: float = number(0.1, 0.0, lo_open=True)
    target_entropy: float | None = number(None, optional=True)
    actor_reduce: str = text("min", ("min", "mean"))
    actor_delay: int = integer(1, 1)  # actor and temperature update every k-th critic update
    warm_start_real: int = integer(512, 0)  # sim transitions put in the real replay when real training starts
    replay_size: int = integer(200_000, 1)

    def __post_init__(self):
        source = f"algorithm ({self.name})"
        check(self, source)
        if self.num_min > self.num_critics:
            raise ConfigError(
                f"{source}: num_min ({self.num_min}) must be <= num_critics ({self.num_critics})"
            )
        if self.replay_size < self.batch_size:
            raise ConfigError(
                f"{source}: replay_size ({self.replay_size}) must be >= batch_size ({self.batch_size})"
            )

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> SACSettings:
        return build(cls, raw, f"algorithm ({raw.get('name', 'sac')})")

    def learner(self) -> dict[str, Any]:
        """``SACConfig`` fields (``algorithms.loops.sac_loop``)."""
        keys = (
            "batch_size",
            "lr",
            "gamma",
            "tau",
            "utd",
            "num_critics",
            "num_min",
            "layer_norm",
            "init_alpha",
            "target_entropy",
            "actor_reduce",
            "actor_delay",
        )
        return {**{k: getattr(self, k) for k in keys}, "critic_hidden": tuple(self.critic_hidden)}


class SACRecipe(JobRecipe):
    def __init__(self, settings: SACSettings):
        self.s = settings
        self.num_steps = settings.num_steps
        self._debt = 0.0
        self._warm = False
        self._resumed = False  # a learner restored from a checkpoint is past its learning_starts
        self._warm_rows = 0  # sim transitions the real replay was warm-started with

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> SACRecipe:
        return cls(SACSettings.from_mapping(raw))

    def describe(self) -> str:
        s = self.s
        return (
            f"{self.name}: utd {s.utd:g} critic updates per sim transition, actor every {s.actor_delay} "
            f"critic update(s), {s.num_critics} critics (min over {s.num_min})"
        )

    def actor(self, policy: str, policy_cfg: dict[str, Any], seed: int):
        from rlinf_robot.workers.sac_actor import SACActorWorker

        if not policy_cfg.get("squash"):
            raise ConfigError(
                f"algorithm={self.name} trains a tanh-squashed policy: set policy.kwargs.squash=true"
            )
        kwargs = dict(
            policy=policy,
            policy_cfg=policy_cfg,
            sac=self.s.learner(),
            seed=seed,
            sim_capacity=self.s.replay_size,
            real_capacity=self.s.replay_size,
        )
        return SACActorWorker, kwargs

    def restore(self, job, episodes: list[dict[str, Any]]) -> int:
        """``--resume``: every usable real episode on disk goes into the real replay (off-policy,
        none is stale); the sim replay is not checkpointed, so the resumed learner goes on as soon
        as a batch can be drawn, without waiting for ``learning_starts`` again. Returns how many
        episodes were used."""
        self._resumed = True
        return self._fill_real(job, episodes)

    def reuse(self, job, episodes: list[dict[str, Any]]) -> int:
        """An earlier job's real episodes seed this one's real replay (a persistent real replay)."""
        return self._fill_real(job, episodes)

    def _fill_real(self, job, episodes: list[dict[str, Any]]) -> int:
        used = 0
        for ep in episodes:
            if job.buffer.add(ep):
                self._add_real(job, ep)
                used += 1
        job.buffer.episodes.clear()
        return used

    def _add_real(self, job, ep: dict[str, Any]) -> dict[str, int]:
        """``ep``'s transitions into the real replay, and the steps an operator took over into the
        demo replay as well (HIL-SERL keeps interventions in both)."""
        from rlinf_robot.orchestrator.buffer import intervened_mask
        from rlinf_robot.workers.sac_actor import transitions_from_episode

        actor = job.groups["actor"]
        transitions = transitions_from_episode(ep)
        sizes = actor.call("add", transitions, "real").wait(120)[0]
        mask = intervened_mask(ep)
        if mask.any():
            sizes = actor.call("add", {k: v[mask] for k, v in transitions.items()}, "demo").wait(120)[0]
        return sizes

    def update(self, job, traj, episodes, use_real):
        from rlinf_robot.workers.sac_actor import transitions_from_trajectory

        actor = job.groups["actor"]
        new = 0
        sizes = None
        if traj is not None:
            sim = transitions_from_trajectory(traj)
            new = len(sim["reward"])
            sizes = actor.call("add", sim, "sim").wait(120)[0]
        real_new = 0
        lags = []
        if use_real:
            if not self._warm:
                sizes = actor.call("warm_start", self.s.warm_start_real).wait(120)[0]
                self._warm_rows = int(sizes.pop("warm"))
                self._warm = True
            for ep in episodes:
                if job.buffer.add(ep):
                    sizes = self._add_real(job, ep)
                    real_new += len(ep["rewards"])
                    lags += list(job.state.version - np.asarray(ep["versions"]))
            job.buffer.episodes.clear()  # the learner's replay holds them now
        if sizes is None:
            sizes = actor.call("sizes").wait(60)[0]
        self._debt += self.s.utd * (new if traj is not None else real_new)
        updates = math.floor(self._debt)
        starts = 0 if self._resumed else self.s.learning_starts
        if sizes["sim"] + sizes["real"] < max(starts, self.s.batch_size):
            updates = 0
        self._debt -= updates
        share = job.cfg.hybrid.real_fraction if use_real else 0.0
        seed = zlib.crc32(f"{job.cfg.seed}/{job.state.update}".encode())
        demo_share = job.cfg.teleop.demo_fraction if use_real else 0.0
        stats = (
            actor.call("train", updates, share, seed, demo_share).wait(600)[0]
            if updates
            else {"critic_updates": 0}
        )
        rows = updates * self.s.batch_size
        real_rows = int(round(stats.get("real_share", 0.0) * rows))
        info = BatchInfo(rows, real_rows, float(np.mean(lags)) if lags else None)
        return {
            **stats,
            "utd": self.s.utd,
            "actor_delay": self.s.actor_delay,
            "real_warm_start": self._warm_rows,
        }, info


@register_recipe("sac")
class _SAC(SACRecipe):
    """SAC: two critics, the actor on their min."""


@register_recipe("rlpd")
class _RLPD(SACRecipe):
    """RLPD's learner: a LayerNorm ensemble of 10, target min over a random 2, the actor on the
    ensemble mean, several critic updates per transition (the preset sets them)."""
