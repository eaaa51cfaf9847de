"""Delta chunks add up from the observed state (rlinf_robot.bridge.anchoring), with the real filter."""

from __future__ import annotations

import numpy as np

from rlinf_robot.bridge.anchoring import Anchor
from rlinf_robot.bridge.backend import FR3_HOME
from rlinf_robot.bridge.ik import tcp_pose
from rlinf_robot.safety import Rejection, RobotState, SafetyFilter, SafetyLimits

RULES = SafetyFilter(SafetyLimits.from_yaml(), control_hz=10.0)
E1 = np.eye(7)[0]


def test_joint_steps_add_up_and_a_skipped_step_is_still_folded_in():
    anchor = Anchor(RobotState(joint_pos=FR3_HOME.copy()))
    actions = np.tile(0.01 * E1, (4, 1))
    first = anchor.target("joint_delta", actions, 0, 7, None, RULES)
    assert first.mode == "joint_position"
    np.testing.assert_allclose(first.values, FR3_HOME + 0.01 * E1)
    third = anchor.target("joint_delta", actions, 2, 7, 0.03, RULES)  # step 1's slot passed unseen
    np.testing.assert_allclose(third.values, FR3_HOME + 0.03 * E1)
    assert third.gripper == 0.03 and anchor.folded == 2


def test_each_delta_is_held_to_the_per_tick_limit_as_the_sim_applies_it():
    anchor = Anchor(RobotState(joint_pos=FR3_HOME.copy()))
    step = float(RULES.limits.joint_step_limit(10.0)[0])
    out = anchor.target("joint_delta", np.tile(2 * step * E1, (2, 1)), 1, 7, None, RULES)
    np.testing.assert_allclose(out.values, FR3_HOME + 2 * step * E1)  # two steps of `step`, not 4


def test_ee_steps_translate_and_rotate_the_observed_tcp():
    pose = tcp_pose(FR3_HOME)
    anchor = Anchor(RobotState(joint_pos=FR3_HOME.copy(), ee_pose=pose))
    d = np.array([0.005, 0.0, -0.005, 0.0, 0.0, 0.02])
    out = anchor.target("ee_delta", np.tile(d, (3, 1)), 2, 6, None, RULES)
    assert out.mode == "ee_target"
    np.testing.assert_allclose(out.values[:3], pose[:3] + 3 * d[:3], atol=1e-12)
    # three rotations of 0.02 rad about z compose to 0.06 rad
    angle = 2 * np.arccos(min(1.0, abs(float(np.dot(out.values[3:], pose[3:])))))
    assert abs(angle - 0.06) < 1e-9


def test_a_step_that_cannot_be_made_is_refused_with_the_filters_reason():
    anchor = Anchor(RobotState(joint_pos=FR3_HOME.copy()))
    bad = np.tile(0.01 * E1, (2, 1))
    bad[1, 2] = np.nan
    assert anchor.target("joint_delta", bad, 0, 7, None, RULES).mode == "joint_position"
    refused = anchor.target("joint_delta", bad, 1, 7, None, RULES)
    assert isinstance(refused, Rejection) and refused.reason == "non_finite"
