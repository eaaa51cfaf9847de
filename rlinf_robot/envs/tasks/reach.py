"""fr3-reach: bring the TCP to a goal point in the air above the table."""

from __future__ import annotations

import numpy as np

from rlinf_robot.envs.tasks.base import Batch, Layout, Task, closeness, register_task
from rlinf_robot.errors import ConfigError

GOAL_LOW = np.array([0.35, -0.25, 0.10])
GOAL_HIGH = np.array([0.65, 0.25, 0.40])
SUCCESS_RADIUS = 0.025  # m


@register_task
class Reach(Task):
    name = "fr3-reach"
    instruction = "move the gripper to the red ball"
    episode_seconds = 3.0
    features: tuple[tuple[str, int], ...] = (("goal_pos", 3), ("goal_minus_tcp", 3))

    def __init__(
        self,
        goal_low=GOAL_LOW,
        goal_high=GOAL_HIGH,
        success_radius: float = SUCCESS_RADIUS,
        goal=None,
        goal_camera: str | None = None,
    ):
        """Goals are drawn uniformly from the box [goal_low, goal_high] (m, base frame); ``goal``
        fixes one.

        ``goal_camera`` (e.g. ``"front"``): the policy sees the goal only as that fixed camera
        measures it - its position in the camera's frame, as a detector on that camera reports it -
        instead of in the base frame. Turning that into a motion of the hand needs to know where the
        camera stands, which a policy learns from the cameras of the env it trained in: trained
        where the scene's nominal camera stands, it reaches the wrong place on a cell whose camera
        stands elsewhere; trained with the camera placed where hand-eye calibration found it
        (``calibration.camera``), it reaches the goal. What a real-to-sim-to-real session's
        calibrate stage is for, measured by ``benchmarks/r2s2r_gain.py``."""
        if goal is not None:
            goal_low = goal_high = goal
        lo, hi = np.asarray(goal_low, np.float64), np.asarray(goal_high, np.float64)
        if lo.shape != (3,) or hi.shape != (3,) or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ConfigError(f"fr3-reach: goals must be 3 finite numbers, got {goal_low!r} / {goal_high!r}")
        if np.any(lo > hi):
            raise ConfigError(f"fr3-reach: goal_low {lo.tolist()} is above goal_high {hi.tolist()}")
        if not success_radius > 0:
            raise ConfigError(f"fr3-reach: success_radius must be positive, got {success_radius!r}")
        self.goal_low, self.goal_high, self.success_radius = lo, hi, float(success_radius)
        self.goal_camera = goal_camera
        if goal_camera is not None:
            if not isinstance(goal_camera, str) or not goal_camera:
                raise ConfigError(f"fr3-reach: goal_camera must name a camera, got {goal_camera!r}")
            self.features = ((f"goal_in_{goal_camera}", 3),)

    def sample(self, rng: np.random.Generator) -> Layout:
        return Layout(self.sample_arm(rng), 0.08, rng.uniform(self.goal_low, self.goal_high))

    def observe(self, b: Batch) -> np.ndarray:
        if self.goal_camera is None:
            return np.concatenate([b.goal, b.goal - b.tcp_pos], axis=1)
        pose = b.cameras.get(self.goal_camera)
        if pose is None:
            raise ConfigError(
                f"fr3-reach: the goal is seen by camera {self.goal_camera!r}, and this env places no "
                f"such camera (it has {sorted(b.cameras)}; on the arm: RealEnvConfig.camera_poses)"
            )
        return (b.goal - pose[:3, 3]) @ pose[:3, :3]  # R^T (goal - t), row by row

    def evaluate(self, b: Batch) -> tuple[np.ndarray, np.ndarray]:
        d = np.linalg.norm(b.goal - b.tcp_pos, axis=1)
        return closeness(d), d < self.success_radius
