"""ManiSkill3 Panda table-top tasks registered as ``maniskill/<name>`` (no asset download needed)."""

from __future__ import annotations

from dataclasses import dataclass

from rlinf_robot.settings import build
from sim.registry import register


@dataclass(frozen=True)
class ManiSkillTask:
    name: str
    env_id: str
    instruction: str


TASKS = (
    ManiSkillTask("pick-cube", "PickCube-v1", "pick up the red cube and move it to the goal"),
    ManiSkillTask("push-cube", "PushCube-v1", "push the cube onto the target"),
    ManiSkillTask("pull-cube", "PullCube-v1", "pull the cube back onto the target"),
)


def _factory(task: ManiSkillTask):
    def make(num_envs: int = 1, **cfg):
        from sim.maniskill.config import ManiSkillConfig
        from sim.maniskill.env import ManiSkillEnv

        return ManiSkillEnv(task, num_envs, build(ManiSkillConfig, cfg, "maniskill env options"))

    make.__doc__ = f"ManiSkill3 {task.env_id}: {task.instruction}"
    return make


for _task in TASKS:
    register(
        f"maniskill/{_task.name}", description=_task.instruction, requires=("mani_skill",), extra="maniskill"
    )(_factory(_task))
