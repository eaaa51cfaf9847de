"""Robots by name: the registry builds a configured, unconnected driver and says what it knows."""

from __future__ import annotations

import pytest

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot import Robot, make_robot, register_robot, robot_class, robot_names


def test_franka_is_built_from_its_config_without_connecting():
    arm = make_robot("franka", robot_ip="10.0.0.2", gripper=False, relative_dynamics_factor=0.3)
    from rlinf_robot.robot.franka import FrankaArm, FrankaConfig

    assert isinstance(arm, FrankaArm) and arm.name == "franka" and not arm.is_connected
    assert arm.config.robot_ip == "10.0.0.2" and arm.config.relative_dynamics_factor == 0.3
    assert robot_class("franka") == (FrankaArm, FrankaConfig)
    assert "franka" in robot_names()


def test_bad_names_and_keys_are_config_errors():
    with pytest.raises(ConfigError, match="unknown robot 'ur5'.*franka"):
        make_robot("ur5")
    with pytest.raises(ConfigError, match="unknown key"):
        make_robot("franka", robot_ipp="10.0.0.2")
    with pytest.raises(ConfigError):
        make_robot("franka", relative_dynamics_factor=3.0)


def test_a_second_arm_is_one_registration():
    class _Config:
        def __init__(self, port: int):
            self.port = port

        @classmethod
        def from_params(cls, params):
            return cls(**params)

    @register_robot(_Config)
    class ToyArm(Robot):
        name = "toy-test-arm"

        def __init__(self, config):
            self.config = config

        def connect(self): ...
        def disconnect(self): ...
        @property
        def is_connected(self):
            return False

        def get_observation(self):
            return {}

        def send_action(self, action):
            return None

        def features(self):
            return {"observation": {}, "action": {}}

    arm = make_robot("toy-test-arm", port=7)
    assert isinstance(arm, ToyArm) and arm.config.port == 7 and "toy-test-arm" in robot_names()
