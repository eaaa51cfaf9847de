"""FrankaArm (no ROS) against franka-sim: the Robot API, deltas, the gripper, stop semantics."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rlinf_robot.robot.franka import ArmState, FrankaArm, FrankaConfig
from rlinf_robot.robot.franka.sim_server import FrankaSimServer
from rlinf_robot.safety import ArmAction, Rejection
from tests.integration.robot.probe import wait_until, within

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def arm():
    with FrankaSimServer(gripper=True):
        robot = FrankaArm(FrankaConfig(robot_ip="127.0.0.1", control_rate_hz=100.0, gripper=True))
        with robot:
            robot.activate()
            yield robot


def test_observation_and_features_agree(arm):
    obs = arm.get_observation()
    for key, feature in arm.features()["observation"].items():
        assert obs[key].shape == feature.shape, key
    assert obs["state"] == "ACTIVE" and obs["gripper_width"][0] == pytest.approx(0.08, abs=1e-3)


def test_a_joint_delta_and_an_ee_delta_move_by_that_much(arm):
    """A delta is relative to the commanded position when it arrives, applied once."""
    q0 = arm.get_observation()["joint_pos"].copy()
    delta = np.array([0.01, 0, 0, -0.01, 0, 0, 0])
    assert arm.send_action(ArmAction("joint_delta", delta))
    assert wait_until(lambda: within(arm.get_observation()["joint_pos"], q0 + delta, 1e-3), 5)
    p0 = arm.get_observation()["ee_pose"][:3].copy()
    assert arm.send_action(ArmAction("ee_delta", np.array([0.004, 0, -0.002, 0, 0, 0])))
    assert wait_until(lambda: np.linalg.norm(arm.get_observation()["ee_pose"][:3] - (p0 + [0.004, 0, -0.002])) < 1e-3, 5)


def test_gripper_moves_and_grasps(arm):
    assert arm.send_action(ArmAction("joint_delta", np.zeros(7), gripper=0.03))
    assert wait_until(lambda: abs(arm.get_observation()["gripper_width"][0] - 0.03) < 1e-3, 5)
    arm.gripper.grasp(0.0)
    assert wait_until(lambda: arm.gripper.is_grasped, 5)
    arm.gripper.move(0.08)
    assert wait_until(lambda: abs(arm.gripper.width - 0.08) < 1e-3, 5)


def test_a_command_from_before_a_stop_never_runs(arm):
    issued = time.time()
    arm.stop("test")
    assert arm.state is ArmState.ESTOP
    assert arm.submit(ArmAction("joint_delta", np.zeros(7))).reason == "not_active"
    ok, message = arm.reset()
    assert ok and arm.state is ArmState.ACTIVE, message
    late = arm.submit(ArmAction("joint_delta", np.full(7, 0.01)), wall_stamp=issued)
    assert isinstance(late, Rejection) and late.reason == "before_stop"
    assert arm.diagnostics()["rejected_before_stop"] == 1
