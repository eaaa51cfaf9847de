"""The job's warm start (``warm_start.*``): SFT on the task's scripted expert in sim, then RL.

RLinf trains its VLAs the same way (supervised fine-tuning on demonstrations, then RL from that
policy). Every embedded task has a scripted expert (``sim.mujoco.experts``), so a job can record
its own demonstrations instead of spending its first few thousand env steps rediscovering what
the expert already knows. The driver records them in a local copy of the training sim (the same
``sim.make`` options the ``SimEnvWorker`` got, so the states match what RL will see) with DART
noise; the actor clones them (``ActorWorker.train_epochs(objective="sft")``) after fitting the
policy's state normalizer to them; the job then pushes the weights and RL starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from rlinf_robot.errors import ConfigError
from rlinf_robot.orchestrator.config import WarmStartConfig
from rlinf_robot.orchestrator.ppo import state_obs

#: Expert demonstrations in sim draw their goals from this seed (+ the job's seed): never a training
#: or evaluation episode's.
SIM_DEMO_SEED = 3_000_017
RECORD_ENVS = 16


@dataclass
class Demos:
    """What the actor clones (``batch``: ``obs``, ``actions`` [B, H, A] env units, ``mask`` [B, H]),
    the states its normalizer is fitted to, and how the recording went."""

    batch: dict[str, Any]
    env_steps: int
    episodes: int
    success: float
    seconds: float

    @property
    def states(self) -> torch.Tensor:
        return self.batch["obs"]["state"]


def check_expert(sim_env: str, action_mode: str) -> None:
    """A warm start needs the env's scripted expert, which acts in ``ee_delta``: say so before any
    worker starts."""
    from sim.mujoco.experts import EXPERTS

    if sim_env not in EXPERTS or action_mode != "ee_delta":
        raise ConfigError(
            f"warm_start.demos > 0 clones a scripted expert, which exists for {sorted(EXPERTS)} in "
            f"task.action_mode=ee_delta (got {sim_env}, {action_mode}); or set warm_start.demos=0"
        )


def record(
    sim_env: str,
    sim_kwargs: dict[str, Any],
    ws: WarmStartConfig,
    chunk_size: int,
    seed: int,
    instruction: str,
) -> Demos:
    """``ws.demos`` expert episodes in ``sim_env`` (successful ones kept), cut into ``chunk_size``-row
    label chunks for the actor's ``sft`` objective."""
    import sim
    from rlinf_robot.algorithms.loops.demos import record_expert
    from sim.mujoco.experts import expert_for

    t0 = time.monotonic()
    expert = expert_for(sim_env)
    env = sim.make(sim_env, num_envs=RECORD_ENVS, **sim_kwargs)
    try:
        rollouts = record_expert(
            env, lambda obs: expert(env, obs), episodes=ws.demos, seed=SIM_DEMO_SEED + seed, noise=ws.noise
        )
    finally:
        env.close()
    demo_set = rollouts.demo_set(chunk_size)
    if len(demo_set) == 0:
        raise RuntimeError(
            f"warm start: none of the scripted expert's {rollouts.episodes} episodes in {sim_env} succeeded"
        )
    states = demo_set.obs["state"].float()
    batch = {"obs": state_obs(states, instruction), "actions": demo_set.actions, "mask": demo_set.mask}
    return Demos(batch, rollouts.env_steps, rollouts.episodes, rollouts.success_rate, time.monotonic() - t0)
