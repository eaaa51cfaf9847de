"""IK on our FK, and the command -> joint target path (names, safety filter, IK)."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.robot.franka.goals import Goal, GoalResolver, ee_pose, joint_targets_by_name
from rlinf_robot.robot.franka.ik import jacobian, pose_error, solve_ik
from rlinf_robot.safety import ArmAction, Rejection, SafetyFilter, fr3_forward_kinematics

HOME = np.array([0.0, 0.0, 0.0, -1.57, 0.0, 1.57, 0.785])


def test_jacobian_matches_finite_differences():
    q = HOME + np.array([0.1, -0.2, 0.3, 0.1, -0.2, 0.1, 0.3])
    j, t = jacobian(q, 0.1034)
    np.testing.assert_allclose(t, fr3_forward_kinematics(q), atol=1e-12)
    eps = 1e-5
    numeric = np.stack([pose_error(fr3_forward_kinematics(q + eps * np.eye(7)[i]), t) / eps for i in range(7)], 1)
    np.testing.assert_allclose(j, numeric, atol=1e-5)


@pytest.mark.parametrize("seed", range(5))
def test_ik_reaches_poses_near_the_start_to_micrometres(seed):
    rng = np.random.default_rng(seed)
    q_true = HOME + rng.normal(0, 0.15, 7)
    target = ee_pose(q_true, 0.1034)
    result = solve_ik(target, HOME)
    assert result.converged
    reached = fr3_forward_kinematics(result.q)
    assert np.linalg.norm(reached[:3, 3] - target[:3]) < 1e-5
    assert np.linalg.norm(pose_error(fr3_forward_kinematics(q_true), reached)[3:]) < 1e-4


def test_joint_targets_by_name():
    current = HOME.copy()
    target, gripper = joint_targets_by_name(["fr3_joint2", "fr3_finger_joint1"], [0.3, 0.02], current)
    assert target[1] == 0.3 and np.all(np.delete(target, 1) == np.delete(HOME, 1)) and gripper == 0.04
    assert isinstance(joint_targets_by_name(["elbow"], [0.1], current), Rejection)
    assert isinstance(joint_targets_by_name(["fr3_joint1"], [0.1, 0.2], current), Rejection)
    assert isinstance(joint_targets_by_name(["fr3_joint1", "fr3_joint1"], [0.1, 0.2], current), Rejection)
    assert joint_targets_by_name([], [], current).reason == "shape"


def test_resolver_scales_far_targets_and_solves_ee_targets_through_the_filter():
    resolver = GoalResolver(SafetyFilter(control_hz=200.0))
    far = Goal(ArmAction("joint_position", HOME + 0.3), 0.0, 0.0, 0)
    target, safe = resolver.resolve(far, HOME, 0.08)
    assert "scaled_step" in safe.adjustments and np.max(np.abs(target - HOME)) <= 0.05 + 1e-12
    ee = ee_pose(HOME, 0.1034)
    goal = ee.copy()
    goal[:3] += [0.001, 0.0, -0.001]  # within one 200 Hz step (2.5 mm)
    target, safe = resolver.resolve(Goal(ArmAction("ee_target", goal), 0.0, 0.0, 0), HOME, 0.08)
    assert safe.mode == "ee_target" and not safe.adjustments
    assert np.linalg.norm(fr3_forward_kinematics(target)[:3, 3] - goal[:3]) < 1e-4
    outside = ee.copy()
    outside[2] = -0.2
    assert resolver.resolve(Goal(ArmAction("ee_target", outside), 0.0, 0.0, 0), HOME, 0.08).reason == "workspace"
    nan = Goal(ArmAction("joint_position", np.full(7, np.nan)), 0.0, 0.0, 0)
    assert resolver.resolve(nan, HOME, 0.08).reason == "non_finite"
