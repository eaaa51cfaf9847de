"""What a MuJoCo task defines: its scene objects, start distribution, features, reward and success.

Tasks are plain numpy over the batch (``Batch`` holds [N, ...] arrays gathered from the N MjData), so
reward and success are computed once per step for all envs, not in a per-env Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    xml: str = ""  # file in sim/mujoco/assets/
    instruction: str = ""
    episode_seconds: float = 5.0  # episode length; steps = seconds * control_hz
    gripper: bool = False  # default for the gripper action column
    has_object: bool = False
    features: tuple[tuple[str, int], ...] = ()  # task columns appended to the 22 robot columns
    arm_noise: float = 0.03  # rad, uniform, on each joint of READY_Q at reset

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


def mujoco_task(cls: type[Task]) -> type[Task]:
    """Class decorator: register ``mujoco/<cls.name>`` in the sim registry (MuJoCo imported on make)."""
    from sim.registry import register

    def factory(num_envs: int = 1, **cfg):
        from sim.mujoco.config import MujocoConfig
        from sim.mujoco.env import MujocoFR3Env

        return MujocoFR3Env(cls(), num_envs, MujocoConfig.from_kwargs(**cfg))

    factory.__doc__ = f"{cls.__name__}: {cls.instruction}"
    register(f"mujoco/{cls.name}", description=cls.instruction, requires=("mujoco",), extra="sim")(factory)
    return cls
