"""The embedded MuJoCo tasks; importing this package registers them (``mujoco/fr3-*``)."""

from sim.mujoco.tasks import lift, push, reach  # noqa: F401 - imported for registration
from sim.mujoco.tasks.base import READY_Q, Batch, Layout, Task, mujoco_task

__all__ = ["READY_Q", "Batch", "Layout", "Task", "mujoco_task"]
