"""FrankaConfig, the launch-YAML plan and the franka-sim block: bad values fail with the key named."""

from __future__ import annotations

import pytest
import yaml

from rlinf_robot.errors import ConfigError
from rlinf_robot.paths import REPO_ROOT
from rlinf_robot.robot.bringup.plan import make_plan, node_blocks
from rlinf_robot.robot.franka.config import FrankaConfig
from rlinf_robot.robot.franka.model import HOME_Q, TCP_OFFSET
from rlinf_robot.robot.franka.sim_service import make_server, sim_options

SIM_YAML = REPO_ROOT / "launch" / "config" / "sim_robot.yaml"


def franka_params(path):
    raw = yaml.safe_load(path.read_text())
    return raw["/**/franka_node"]["ros__parameters"]


@pytest.mark.parametrize("name", ["robot.yaml", "sim_robot.yaml"])
def test_shipped_yaml_builds_a_valid_config(name):
    params = {
        k: v
        for k, v in franka_params(REPO_ROOT / "launch" / "config" / name).items()
        if k not in ("diagnostics_rate_hz", "base_frame")
    }
    config = FrankaConfig.from_params(params)
    assert config.control_rate_hz >= 100 and 0 < config.relative_dynamics_factor <= 1
    assert config.limits().tcp_offset == TCP_OFFSET and config.home_q == tuple(HOME_Q)


@pytest.mark.parametrize(
    "key,value,allowed",
    [
        ("control_rate_hz", -5.0, "[10.0, 1000.0]"),
        ("relative_dynamics_factor", 1.5, "(0.0, 1.0]"),
        ("deadman_ms", float("nan"), "[1.0"),
        ("max_faults", 0, ">= 1"),
        ("home_q", [0.0] * 6, "7 finite"),
        ("gripper", "yes", "true or false"),
    ],
)
def test_out_of_range_values_name_the_key_and_range(key, value, allowed):
    with pytest.raises(ConfigError) as err:
        FrankaConfig.from_params({key: value})
    assert key in str(err.value) and allowed in str(err.value)


def test_unknown_key_and_missing_limits_file():
    with pytest.raises(ConfigError, match="unknown key"):
        FrankaConfig.from_params({"robot_ipp": "1.2.3.4"})
    with pytest.raises(ConfigError, match="limits_file"):
        FrankaConfig(limits_file="/nonexistent/limits.yaml").limits()


def test_ints_from_yaml_are_accepted_as_floats():
    assert FrankaConfig.from_params({"control_rate_hz": 100}).control_rate_hz == 100.0


def test_plan_from_yaml(tmp_path):
    plan = make_plan(SIM_YAML, sim=True, namespace="arm1", robot_ip="10.0.0.2")
    assert plan[0].name == "franka_sim" and plan[0].ready_line
    names = [c.name for c in plan[1:]]
    assert names == node_blocks(SIM_YAML)
    franka = next(c for c in plan if c.name == "franka_node")
    assert franka.lifecycle and franka.fqn == "/arm1/franka_node"
    assert franka.argv[-2:] == ["-p", "robot_ip:=10.0.0.2"]
    assert "__ns:=/arm1" in franka.argv and "__node:=franka_node" in franka.argv
    empty = tmp_path / "empty.yaml"
    empty.write_text("franka_sim:\n  ros__parameters: {}\n")
    with pytest.raises(ConfigError, match="no node blocks"):
        make_plan(empty, sim=True)
    broken = tmp_path / "broken.yaml"
    broken.write_text("/**/franka_node:\n  robot_ip: 1.2.3.4\n")
    with pytest.raises(ConfigError, match="ros__parameters"):
        make_plan(broken, sim=False)


def test_sim_block_options(tmp_path):
    opts = sim_options(SIM_YAML)
    assert opts["gripper"] is True and opts["enforce_motion_limits"] is False
    server = make_server({**opts, "enforce_motion_limits": True, "joint_damping": [1, 2, 3, 4, 5, 6, 7]})
    assert (
        "--enforce-motion-limits" in server.extra_args and server.env["FR3_JOINT_DAMPING"] == "1,2,3,4,5,6,7"
    )
    assert server.die_with_parent
    bad = tmp_path / "bad.yaml"
    bad.write_text("franka_sim:\n  ros__parameters:\n    enforce: true\n")
    with pytest.raises(ConfigError, match="unknown key"):
        sim_options(bad)
