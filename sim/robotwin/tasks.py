"""RoboTwin 2.0 single-arm tasks registered as ``robotwin/<name>`` (GPU node, assets downloaded)."""

from __future__ import annotations

from dataclasses import dataclass

from rlinf_robot.settings import build
from sim.registry import register

INSTALL_HINT = (
    "RoboTwin runs in its own Python 3.10/3.11 venv on a GPU node: pip install 'rlinf-robotwin-runtime==0.1.1' "
    "&& robotwin-download-assets (see benchmarks/gpu_check.sh)"
)


@dataclass(frozen=True)
class RoboTwinTask:
    name: str
    task_name: str  # RoboTwin's task module name


TASKS = (
    RoboTwinTask("click-bell", "click_bell"),
    RoboTwinTask("beat-block-hammer", "beat_block_hammer"),
    RoboTwinTask("place-empty-cup", "place_empty_cup"),
)


def _factory(task: RoboTwinTask):
    def make(num_envs: int = 1, **cfg):
        from sim.robotwin.config import RoboTwinConfig
        from sim.robotwin.env import RoboTwinEnv

        return RoboTwinEnv(task, num_envs, build(RoboTwinConfig, cfg, "robotwin env options"))

    make.__doc__ = f"RoboTwin 2.0 {task.task_name} (one Franka arm driven)"
    return make


for _task in TASKS:
    register(
        f"robotwin/{_task.name}",
        description=f"RoboTwin {_task.task_name}",
        requires=("robotwin",),
        extra="robotwin",
        device="gpu",
        hint=INSTALL_HINT,
    )(_factory(_task))
