"""`rlinf-robot robot up` as a supervisor: clear failures, restarts, clean stops, no orphans.

These use a camera-only or a misconfigured stack, so they need no franka-sim (and no lock).
"""

from __future__ import annotations

import os
import signal

import pytest
import yaml

from tests.integration.robot.conftest import SIM_CONFIG, RobotUp, alive, derived_config, descendants
from tests.integration.robot.probe import wait_until

pytestmark = pytest.mark.integration


def camera_only(tmp_path):
    return derived_config(tmp_path, "camera_only.yaml", {"camera_node"})


def test_unknown_node_fails_before_starting_anything(tmp_path):
    raw = yaml.safe_load(SIM_CONFIG.read_text())
    raw["/**/no_such_node"] = {"ros__parameters": {"x": 1}}
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(raw))
    up = RobotUp("--config", str(config))
    assert up.proc.wait(timeout=60) == 2, up.text()
    assert "no_such_node" in up.text() and "not found" in up.text()


def test_bad_parameter_makes_franka_node_fail_to_configure(tmp_path):
    config = derived_config(
        tmp_path, "bad_rate.yaml", {"franka_node"}, {"franka_node": {"control_rate_hz": -5.0}}
    )
    up = RobotUp("--config", str(config))
    assert up.proc.wait(timeout=120) == 1, up.text()
    text = up.text()
    assert "franka_node failed to configure" in text and "control_rate_hz" in text


@pytest.mark.slow
def test_restarts_a_crashed_node_and_stops_cleanly(tmp_path):
    up = RobotUp("--config", str(camera_only(tmp_path)))
    try:
        pids = up.ready(timeout=120)
        old = pids["camera_node"]
        os.kill(old, signal.SIGKILL)
        new = int(up.wait_for(r"camera_node running again \(pid (\d+)\)", 60).group(1))
        assert new != old and alive(new)
        family = descendants(up.proc.pid)
        assert new in family
    finally:
        code = up.stop(signal.SIGTERM)
    assert code == 0, up.text()[-2000:]
    assert wait_until(lambda: not any(alive(p) for p in family), 15)


@pytest.mark.slow
def test_killing_robot_up_takes_its_children_along(tmp_path):
    up = RobotUp("--config", str(camera_only(tmp_path)))
    up.ready(timeout=120)
    family = descendants(up.proc.pid)
    assert family
    up.stop(signal.SIGKILL)
    assert wait_until(lambda: not any(alive(p) for p in family), 20), "orphaned children"
