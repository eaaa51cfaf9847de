"""fr3-lift: grasp a block and lift it 10 cm off the table."""

from __future__ import annotations

import numpy as np

from rlinf_robot.envs.tasks.base import Batch, Layout, Task, closeness, register_task

OBJ_LOW, OBJ_HIGH = np.array([0.40, -0.15]), np.array([0.60, 0.15])
HALF = np.array([0.02, 0.02, 0.04])  # block half sizes (assets/lift.xml)
LIFT_HEIGHT = 0.10  # m above the start
SUCCESS_MARGIN = 0.02  # success once within this of the lift height
GRASP_HEIGHT = 0.06  # TCP height of a grasp: above the safety floor (0.05), pads on the block


def grasp_point(b: Batch) -> np.ndarray:
    assert b.obj_pos is not None  # has_object: every batch carries the block's pose
    return np.concatenate([b.obj_pos[:, :2], np.maximum(b.obj_pos[:, 2:] + 0.02, GRASP_HEIGHT)], axis=1)


def grasped(b: Batch) -> np.ndarray:
    """Fingers closed on the block: opening about the block width, block between the fingertips."""
    near = np.linalg.norm(grasp_point(b) - b.tcp_pos, axis=1) < 0.03
    return near & (b.width > 2 * HALF[0] - 0.008) & (b.width < 2 * HALF[0] + 0.01)


@register_task
class Lift(Task):
    name = "fr3-lift"
    instruction = "pick up the orange block and lift it"
    episode_seconds = 8.0
    gripper = True
    has_object = True
    features = (("obj_pos", 3), ("obj_quat", 4), ("obj_minus_tcp", 3), ("goal_minus_obj", 3))

    def sample(self, rng: np.random.Generator) -> Layout:
        obj = np.append(rng.uniform(OBJ_LOW, OBJ_HIGH), HALF[2])
        goal = obj + np.array([0.0, 0.0, LIFT_HEIGHT])
        return Layout(self.sample_arm(rng), 0.08, goal, obj, rng.uniform(-0.4, 0.4))

    def observe(self, b: Batch) -> np.ndarray:
        return np.concatenate([b.obj_pos, b.obj_quat, b.obj_pos - b.tcp_pos, b.goal - b.obj_pos], axis=1)

    def evaluate(self, b: Batch) -> tuple[np.ndarray, np.ndarray]:
        assert b.obj_pos is not None  # has_object: every batch carries the block's pose
        held = grasped(b)
        reach = closeness(np.linalg.norm(grasp_point(b) - b.tcp_pos, axis=1))
        lift = closeness(np.maximum(b.goal[:, 2] - b.obj_pos[:, 2], 0.0))
        reward = 0.4 * reach + held * (0.2 + 0.4 * lift)
        success = b.obj_pos[:, 2] >= b.goal[:, 2] - SUCCESS_MARGIN
        return reward, success
