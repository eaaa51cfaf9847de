"""fr3-push: push a block across the table onto a goal disc, gripper held closed as a pusher."""

from __future__ import annotations

import numpy as np

from rlinf_robot.envs.tasks.base import Batch, Layout, Task, closeness, register_task

OBJ_LOW, OBJ_HIGH = np.array([0.40, -0.15]), np.array([0.55, 0.15])
HALF = np.array([0.03, 0.03, 0.035])  # block half sizes (assets/push.xml)
PUSH_DISTANCE = (0.08, 0.14)  # m, goal distance from the start
PUSH_HEIGHT = 0.055  # TCP height while pushing: above the safety floor (0.05), below the block top
SUCCESS_RADIUS = 0.03  # m, in the table plane


def push_point(b: Batch) -> np.ndarray:
    """Where the TCP should be to push the block towards the goal: behind it, at pushing height."""
    assert b.obj_pos is not None  # has_object: every batch carries the block's pose
    direction = b.goal[:, :2] - b.obj_pos[:, :2]
    direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-6)
    xy = b.obj_pos[:, :2] - direction * (HALF[0] + 0.02)
    return np.concatenate([xy, np.full((len(xy), 1), PUSH_HEIGHT)], axis=1)


@register_task
class Push(Task):
    name = "fr3-push"
    instruction = "push the blue block onto the green target"
    episode_seconds = 6.0
    has_object = True
    features = (("obj_pos", 3), ("goal_pos", 3), ("obj_minus_tcp", 3), ("goal_minus_obj", 3))

    def sample(self, rng: np.random.Generator) -> Layout:
        obj = np.append(rng.uniform(OBJ_LOW, OBJ_HIGH), HALF[2])
        angle = rng.uniform(-np.pi / 3, np.pi / 3)
        dist = rng.uniform(*PUSH_DISTANCE)
        goal = obj + np.array([np.cos(angle) * dist, np.sin(angle) * dist, 0.0])
        return Layout(self.sample_arm(rng), 0.0, goal, obj, rng.uniform(-0.3, 0.3))

    def marker(self, goal: np.ndarray) -> np.ndarray:
        return np.array([goal[0], goal[1], 0.001])  # the disc lies on the table

    def observe(self, b: Batch) -> np.ndarray:
        return np.concatenate([b.obj_pos, b.goal, b.obj_pos - b.tcp_pos, b.goal - b.obj_pos], axis=1)

    def evaluate(self, b: Batch) -> tuple[np.ndarray, np.ndarray]:
        assert b.obj_pos is not None  # has_object: every batch carries the block's pose
        d_goal = np.linalg.norm(b.goal[:, :2] - b.obj_pos[:, :2], axis=1)
        d_tcp = np.linalg.norm(push_point(b) - b.tcp_pos, axis=1)
        reward = 0.3 * closeness(d_tcp) + 0.7 * closeness(d_goal)
        return reward, d_goal < SUCCESS_RADIUS
