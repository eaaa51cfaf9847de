"""A task, defined once for every simulator and the arm: instruction, start and goal sampling, the
state columns it adds, reward and success.

Tasks are plain numpy over a batch (``Batch`` holds [N, ...] arrays: gathered from N MjData in the
MuJoCo sim, from observations and chunk traces on the arm), so sim and arm score an episode with
the same code, and reward and success are computed once per step for all envs. Registered by name
(``fr3-reach``, ...): ``make_task(name, **options)``; the sims build their scenes for them
(``sim/mujoco/tasks``) and ``RealRobotEnv`` looks them up by the same name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlinf_robot.errors import ConfigError

#: Start pose: TCP at (0.45, 0, 0.30) m pointing down, fingers along the base y axis (solved by IK).
READY_Q = np.array([0.0, -0.2594, 0.0, -2.4315, 0.0, 2.1721, 0.7854])


@dataclass
class Batch:
    """The state of N envs after a control tick (world frame = robot base frame)."""

    q: np.ndarray  # [N, 7]
    qd: np.ndarray  # [N, 7]
    tcp_pos: np.ndarray  # [N, 3]
    tcp_quat: np.ndarray  # [N, 4] w x y z
    width: np.ndarray  # [N] finger opening (m)
    obj_pos: np.ndarray | None  # [N, 3]
    obj_quat: np.ndarray | None  # [N, 4]
    goal: np.ndarray  # [N, 3] task goal (reach target, push target, lift height point)
    obj_start: np.ndarray  # [N, 3] object position at reset (zeros without an object)
    #: Where the env's fixed cameras stand: name -> 4x4 pose in the base frame, OpenCV axes (z
    #: forward). The sims read theirs from the scene (placed where calibration found the real ones,
    #: or the nominal ones); the arm's come from ``RealEnvConfig.camera_poses``. Tasks that observe
    #: something *through* a camera (``fr3-reach`` with ``goal_camera``) measure it from here.
    cameras: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Layout:
    """One env's episode start, drawn by ``Task.sample``."""

    arm_q: np.ndarray  # [7]
    gripper_width: float
    goal: np.ndarray  # [3]
    obj_pos: np.ndarray | None = None  # [3]
    obj_yaw: float = 0.0


class Task:
    """Base class; subclasses set the class attributes and implement the three methods."""

    name: str = ""
    instruction: str = ""
    episode_seconds: float = 5.0  # episode length; steps = seconds * control_hz
    gripper: bool = False  # default for the gripper action column
    has_object: bool = False
    features: tuple[tuple[str, int], ...] = ()  # task columns appended to the 22 robot columns
    arm_noise: float = 0.03  # rad, uniform, on each joint of READY_Q at reset
    #: the fixed camera the task's observation is measured through (``Batch.cameras``), if any
    goal_camera: str | None = None

    @property
    def feature_dim(self) -> int:
        return sum(w for _, w in self.features)

    def sample(self, rng: np.random.Generator) -> Layout:
        raise NotImplementedError

    def observe(self, b: Batch) -> np.ndarray:
        """Task columns of the state vector, [N, feature_dim]."""
        raise NotImplementedError

    def evaluate(self, b: Batch) -> tuple[np.ndarray, np.ndarray]:
        """(dense reward [N] in [0, 1], success [N] bool)."""
        raise NotImplementedError

    def marker(self, goal: np.ndarray) -> np.ndarray:
        """Where the goal marker (mocap body ``goal``, if the scene has one) is drawn."""
        return goal

    def sample_arm(self, rng: np.random.Generator) -> np.ndarray:
        return READY_Q + rng.uniform(-self.arm_noise, self.arm_noise, 7)


def closeness(d: np.ndarray, scale: float = 10.0) -> np.ndarray:
    """1 at distance 0, falling smoothly to 0: the usual dense shaping term (1 - tanh(scale * d))."""
    return 1.0 - np.tanh(scale * d)


TASKS: dict[str, type[Task]] = {}


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: make ``cls`` known by ``cls.name`` (to the sims and the arm alike)."""
    if not cls.name or cls.name in TASKS:
        raise ValueError(f"task name {cls.name!r} is empty or taken")
    TASKS[cls.name] = cls
    return cls


def make_task(name: str, **options: Any) -> Task:
    """The task ``name`` with its constructor ``options`` (a bad name or option: ``ConfigError``)."""
    import rlinf_robot.envs.tasks  # noqa: F401 - fills TASKS

    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; known: {sorted(TASKS)}")
    try:
        return TASKS[name](**options)
    except TypeError as e:
        raise ConfigError(f"task {name!r}: {e}") from None
