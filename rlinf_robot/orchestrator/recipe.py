"""How a training job learns: one ``JobRecipe`` per ``algorithm.name``, chosen from a registry.

``TrainJob`` runs the loop every recipe shares (sim rollouts, the arms' episodes, weight pushes,
checkpoints, metrics); a recipe says what differs between on-policy and off-policy learning:

- ``actor()``: which learner worker the job launches and with what (``ActorWorker`` with PPO's
  objective; ``SACActorWorker`` with its replays);
- ``num_steps``: sim decisions per env per update;
- ``update(job, traj, episodes, use_real)``: one update from a sim rollout (or none) and the real
  episodes that arrived, returning the learner's stats and what the batch held;
- ``restore(job, episodes)``: real episodes from disk (``--resume``, a shared real replay).

Adding a recipe is one module with a ``@register_recipe("name")`` class, imported below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlinf_robot.errors import ConfigError

RECIPES: dict[str, type[JobRecipe]] = {}


@dataclass
class BatchInfo:
    """What one update trained on, for the metrics: rows, rows from the arms, and how many policy
    versions old the real rows were on average (None without real rows)."""

    rows: int
    real_rows: int
    real_policy_lag: float | None = None


class JobRecipe:
    name = ""
    num_steps: int

    def actor(self, policy: str, policy_cfg: dict[str, Any], seed: int) -> tuple[type, dict[str, Any]]:
        raise NotImplementedError

    def update(self, job, traj: dict[str, Any] | None, episodes: list[dict[str, Any]], use_real: bool):
        """-> (stats dict, BatchInfo)."""
        raise NotImplementedError

    def restore(self, job, episodes: list[dict[str, Any]]) -> int:
        """``--resume``: the run's own real episodes back into the source-tagged buffer (their
        policy versions are this run's, so the staleness bound applies as before). Returns how
        many it kept."""
        return sum(job.buffer.add(ep) for ep in episodes)

    def reuse(self, job, episodes: list[dict[str, Any]]) -> int:
        """A new job pointed at an earlier job's real replay (``hybrid.real_replay_dir``): how many
        episodes it trains on. On-policy learning has no use for another run's old episodes."""
        return 0

    def describe(self) -> str:
        return self.name


def register_recipe(name: str):
    def deco(cls: type[JobRecipe]) -> type[JobRecipe]:
        if name in RECIPES:
            raise ValueError(f"job recipe {name!r} registered twice")
        cls.name = name
        RECIPES[name] = cls
        return cls

    return deco


def make_recipe(algorithm: dict[str, Any]) -> JobRecipe:
    """``algorithm`` (the composed config group) -> its recipe; an unknown name or key is one
    ``ConfigError`` naming it."""
    from rlinf_robot.orchestrator import ppo, sac  # noqa: F401  (they register themselves)

    raw = dict(algorithm)
    name = raw.get("name")
    if name not in RECIPES:
        raise ConfigError(f"algorithm.name {name!r} unknown; known: {sorted(RECIPES)}")
    return RECIPES[name].from_mapping(raw)
