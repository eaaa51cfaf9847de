"""Tasks for the real arm: the reward and task state a simulator would compute, from the EE pose.

Same shape as a sim task (``features``, ``observe``, ``evaluate``, ``instruction``), so the state
vector and reward of ``RealRobotEnv`` line up with the simulator's version of the task. For now the
predicates use only the arm's own state (the TCP pose); tasks that need object poses plug in a
perception source the same way. Registered by name, looked up from config.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rlinf_robot.errors import ConfigError

REAL_TASKS: dict[str, type] = {}


def register_real_task(name: str) -> Callable[[type], type]:
    def deco(cls: type) -> type:
        REAL_TASKS[name] = cls
        return cls

    return deco


def make_real_task(name: str, **kwargs):
    if name not in REAL_TASKS:
        raise ConfigError(f"unknown real task {name!r}; known: {sorted(REAL_TASKS)}")
    try:
        return REAL_TASKS[name](**kwargs)
    except TypeError as e:
        raise ConfigError(f"real task {name!r}: {e}") from None


def closeness(d: np.ndarray, scale: float = 10.0) -> np.ndarray:
    """1 at distance 0, falling smoothly to 0 (the sim tasks' dense shaping term)."""
    return 1.0 - np.tanh(scale * d)


@register_real_task("reach")
class ReachTask:
    """Bring the TCP to ``goal`` (m, base frame); success within ``success_radius``.

    ``goal_low``/``goal_high`` (optional) sample a new goal per episode, like the sim task.
    """

    instruction = "move the gripper to the red ball"
    features = (("goal_pos", 3), ("goal_minus_tcp", 3))

    def __init__(self, goal=(0.5, 0.0, 0.3), success_radius: float = 0.025, goal_low=None, goal_high=None):
        self.goal = np.asarray(goal, dtype=np.float64)
        if self.goal.shape != (3,) or not np.all(np.isfinite(self.goal)):
            raise ConfigError(f"reach: goal must be 3 finite numbers, got {goal!r}")
        if not success_radius > 0:
            raise ConfigError(f"reach: success_radius must be positive, got {success_radius}")
        self.success_radius = float(success_radius)
        self.goal_low = None if goal_low is None else np.asarray(goal_low, dtype=np.float64)
        self.goal_high = None if goal_high is None else np.asarray(goal_high, dtype=np.float64)
        self.goals: np.ndarray | None = None

    def reset(self, num_envs: int, rng: np.random.Generator, index: int | None = None) -> None:
        if self.goals is None:
            self.goals = np.tile(self.goal, (num_envs, 1))
        if self.goal_low is not None and self.goal_high is not None:
            rows = range(num_envs) if index is None else [index]
            for i in rows:
                self.goals[i] = rng.uniform(self.goal_low, self.goal_high)

    def observe(self, tcp_pos: np.ndarray) -> np.ndarray:
        return np.concatenate([self.goals, self.goals - tcp_pos], axis=1)

    def evaluate(self, tcp_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = np.linalg.norm(self.goals - tcp_pos, axis=1)
        return closeness(d).astype(np.float32), d < self.success_radius
