"""The embedded MuJoCo scenes of the shared tasks (``rlinf_robot.envs.tasks``): importing this
package registers ``mujoco/<task>`` for each task that has a scene in ``sim/mujoco/assets``."""

from __future__ import annotations

from rlinf_robot.envs.tasks import TASKS, make_task
from rlinf_robot.settings import build

#: task name -> scene file in sim/mujoco/assets/ (the FR3, a table and the task's objects)
SCENES = {"fr3-reach": "reach.xml", "fr3-push": "push.xml", "fr3-lift": "lift.xml"}


def _register(task_name: str, scene: str) -> None:
    from sim.registry import register

    cls = TASKS[task_name]

    def factory(num_envs: int = 1, task_options: dict | None = None, **cfg):
        from sim.mujoco.config import MujocoConfig
        from sim.mujoco.env import MujocoFR3Env

        return MujocoFR3Env(
            make_task(task_name, **(task_options or {})),
            num_envs,
            build(MujocoConfig, cfg, "mujoco env options"),
            scene,
        )

    factory.__doc__ = f"{cls.__name__}: {cls.instruction}"
    register(f"mujoco/{task_name}", description=cls.instruction, requires=("mujoco",), extra="sim")(factory)


for _name, _scene in SCENES.items():
    _register(_name, _scene)
