"""Isaac Lab Franka tasks registered as ``isaaclab/<name>`` (GPU, Isaac Lab 2.x/3.x)."""

from __future__ import annotations

from dataclasses import dataclass

from rlinf_robot.settings import build
from sim.registry import register

INSTALL_HINT = (
    "Isaac Lab runs on a GPU node with Python 3.11/3.12: pip install 'isaaclab[isaacsim,all]' "
    "--extra-index-url https://pypi.nvidia.com (see benchmarks/gpu_check.sh)"
)


@dataclass(frozen=True)
class IsaacLabTask:
    name: str
    joint_id: str  # joint-position task id (we swap in a relative joint action for joint_delta)
    ik_rel_id: str  # differential-IK relative task id (ee_delta)
    command: str  # the task's command term (goal)
    instruction: str
    success_threshold: float  # m
    has_object: bool
    gripper: bool  # whether the task has a gripper action term


TASKS = (
    IsaacLabTask(
        "franka-lift",
        "Isaac-Lift-Cube-Franka-v0",
        "Isaac-Lift-Cube-Franka-IK-Rel-v0",
        "object_pose",
        "lift the cube to the goal",
        0.02,
        True,
        True,
    ),
    IsaacLabTask(
        "franka-reach",
        "Isaac-Reach-Franka-v0",
        "Isaac-Reach-Franka-IK-Rel-v0",
        "ee_pose",
        "move the hand to the goal pose",
        0.02,
        False,
        False,
    ),
)


def _factory(task: IsaacLabTask):
    def make(num_envs: int = 1, **cfg):
        from sim.isaaclab.config import IsaacLabConfig
        from sim.isaaclab.env import IsaacLabEnv

        return IsaacLabEnv(task, num_envs, build(IsaacLabConfig, cfg, "isaaclab env options"))

    make.__doc__ = f"Isaac Lab {task.ik_rel_id}: {task.instruction}"
    return make


for _task in TASKS:
    register(
        f"isaaclab/{_task.name}",
        description=_task.instruction,
        requires=("isaaclab", "isaaclab_tasks"),
        extra="isaaclab",
        device="gpu",
        hint=INSTALL_HINT,
    )(_factory(_task))
