"""The tasks, defined once for the sims and the arm (see ``base``); importing registers them."""

from rlinf_robot.envs.tasks import lift, push, reach  # noqa: F401 - imported for registration
from rlinf_robot.envs.tasks.base import (
    READY_Q,
    TASKS,
    Batch,
    Layout,
    Task,
    closeness,
    make_task,
    register_task,
)

__all__ = ["READY_Q", "TASKS", "Batch", "Layout", "Task", "closeness", "make_task", "register_task"]
