"""fr3-reach: bring the TCP to a goal point in the air above the table."""

from __future__ import annotations

import numpy as np

from sim.mujoco.tasks.base import Batch, Layout, Task, closeness, mujoco_task

GOAL_LOW = np.array([0.35, -0.25, 0.10])
GOAL_HIGH = np.array([0.65, 0.25, 0.40])
SUCCESS_RADIUS = 0.025  # m


@mujoco_task
class Reach(Task):
    name = "fr3-reach"
    xml = "reach.xml"
    instruction = "move the gripper to the red ball"
    episode_seconds = 3.0
    features = (("goal_pos", 3), ("goal_minus_tcp", 3))

    def sample(self, rng: np.random.Generator) -> Layout:
        return Layout(self.sample_arm(rng), 0.08, rng.uniform(GOAL_LOW, GOAL_HIGH))

    def observe(self, b: Batch) -> np.ndarray:
        return np.concatenate([b.goal, b.goal - b.tcp_pos], axis=1)

    def evaluate(self, b: Batch) -> tuple[np.ndarray, np.ndarray]:
        d = np.linalg.norm(b.goal - b.tcp_pos, axis=1)
        return closeness(d), d < SUCCESS_RADIUS
