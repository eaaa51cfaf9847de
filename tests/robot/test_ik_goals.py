"""The command -> joint target path: joint names, the safety filter, IK for EE targets.

FK and IK themselves are checked against MuJoCo in ``test_fr3_model.py``.
"""

from __future__ import annotations

import numpy as np

from rlinf_robot.robot.franka.goals import Goal, GoalResolver, joint_targets_by_name
from rlinf_robot.robot.franka.model import HOME_Q, tcp_pose, tcp_position
from rlinf_robot.safety import ArmAction, Rejection, SafetyFilter


def test_joint_targets_by_name():
    current = HOME_Q.copy()
    target, gripper = joint_targets_by_name(["fr3_joint2", "fr3_finger_joint1"], [0.3, 0.02], current)
    assert target[1] == 0.3 and np.all(np.delete(target, 1) == np.delete(HOME_Q, 1)) and gripper == 0.04
    assert isinstance(joint_targets_by_name(["elbow"], [0.1], current), Rejection)
    assert isinstance(joint_targets_by_name(["fr3_joint1"], [0.1, 0.2], current), Rejection)
    assert isinstance(joint_targets_by_name(["fr3_joint1", "fr3_joint1"], [0.1, 0.2], current), Rejection)
    assert joint_targets_by_name([], [], current).reason == "shape"


def test_resolver_scales_far_targets_and_solves_ee_targets_through_the_filter():
    resolver = GoalResolver(SafetyFilter(control_hz=200.0))
    far = Goal(ArmAction("joint_position", HOME_Q + 0.3), 0.0, 0.0, 0)
    target, safe = resolver.resolve(far, HOME_Q, 0.08)
    assert "scaled_step" in safe.adjustments and np.max(np.abs(target - HOME_Q)) <= 0.05 + 1e-12
    ee = tcp_pose(HOME_Q)
    goal = ee.copy()
    goal[:3] += [0.001, 0.0, -0.001]  # within one 200 Hz step (2.5 mm)
    target, safe = resolver.resolve(Goal(ArmAction("ee_target", goal), 0.0, 0.0, 0), HOME_Q, 0.08)
    assert safe.mode == "ee_target" and not safe.adjustments
    assert np.linalg.norm(tcp_position(target) - goal[:3]) < 1e-4
    outside = ee.copy()
    outside[2] = -0.2
    assert (
        resolver.resolve(Goal(ArmAction("ee_target", outside), 0.0, 0.0, 0), HOME_Q, 0.08).reason
        == "workspace"
    )
    nan = Goal(ArmAction("joint_position", np.full(7, np.nan)), 0.0, 0.0, 0)
    assert resolver.resolve(nan, HOME_Q, 0.08).reason == "non_finite"
