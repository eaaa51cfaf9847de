"""Real reflexes: franka-sim with --enforce-motion-limits aborts a too-fast motion exactly as the
FCI does, and the node's fault state machine must recover by itself, then latch after repeated
faults until an operator resets it.

"Too fast": at relative_dynamics_factor 1.0 franky plans with its own limits, whose joint
accelerations (15-20 rad/s^2 on some joints) exceed the FR3's 10 rad/s^2 that franka-sim
enforces. The node runs at 50 Hz here: franka-sim differentiates the command stream numerically,
and on a loaded 2-core machine motion hand-overs at high rates can trip it spuriously.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.robot.franka.model import HOME_Q as HOME
from tests.integration.robot.conftest import RobotUp, derived_config
from tests.integration.robot.probe import wait_until, within

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SLOW, FAST = 0.2, 1.0
JOINT1 = np.array([1.0, 0, 0, 0, 0, 0, 0])


@pytest.fixture(scope="module")
def faulty(tmp_path_factory, probe):
    config = derived_config(
        tmp_path_factory.mktemp("faults"),
        "faults.yaml",
        {"franka_sim", "franka_node"},
        {
            "franka_sim": {"enforce_motion_limits": True, "gripper": False},
            "franka_node": {
                "control_rate_hz": 50.0,
                "max_faults": 4,
                "fault_window_s": 120.0,
                "gripper": False,
                "rehome_on_recover": True,
            },
        },
    )
    up = RobotUp("--sim", "--config", str(config))
    try:
        up.ready()
        assert wait_until(lambda: probe.q() is not None and probe.state() == "ACTIVE", 30), up.text()[-3000:]
        yield probe
    finally:
        up.stop()


def set_factor(probe, value: float) -> None:
    result = probe.set_param("franka_node", "relative_dynamics_factor", value)
    assert result.successful, result.reason


def test_too_fast_command_reflexes_recovers_rehomes_and_accepts_commands(faulty):
    arm = faulty
    away = HOME + np.array([0, 0, 0, 0.1, 0, 0, 0])
    assert wait_until(lambda: within(arm.q(), away, 1e-3), 20, action=lambda: arm.send_joints(away))
    reflexes = arm.count("reflexes")
    set_factor(arm, FAST)
    try:
        target = away + 0.5 * JOINT1
        assert wait_until(
            lambda: arm.count("reflexes") > reflexes, 15, action=lambda: arm.send_joints(target)
        ), arm.diag
    finally:
        set_factor(arm, SLOW)
    assert int(arm.diag.get("ACTIVE->REFLEX", "0")) >= 1
    assert wait_until(lambda: arm.count("recoveries") >= 1, 15), arm.diag
    # rehome_on_recover: the arm goes back home by itself, then takes commands again
    assert wait_until(lambda: within(arm.q(), HOME, 2e-3) and arm.state() == "ACTIVE", 30), arm.diag
    assert int(arm.fresh_diag().get("RECOVERING->ACTIVE", "0")) >= 1
    target = HOME + 0.05 * JOINT1
    assert wait_until(lambda: within(arm.q(), target, 1e-3), 30, action=lambda: arm.send_joints(target)), (
        f"q - target {np.round(arm.q() - target, 4).tolist()}, diagnostics {arm.fresh_diag()}"
    )


def test_repeated_reflexes_latch_until_reset(faulty):
    arm = faulty
    q0 = arm.q()
    set_factor(arm, FAST)
    try:
        target = q0 - 0.5 * JOINT1
        assert wait_until(lambda: arm.state() == "LATCHED", 60, action=lambda: arm.send_joints(target)), (
            arm.diag
        )
    finally:
        set_factor(arm, SLOW)
    assert arm.count("reflexes") >= 2
    # latched: commands are ignored and recover is refused; only reset clears it
    ignored = arm.count("rejected_not_active")
    q_latched = arm.q()
    nudge = q_latched + 0.05 * JOINT1
    assert not wait_until(
        lambda: not within(arm.q(), q_latched, 1e-3), 0.6, action=lambda: arm.send_joints(nudge)
    )
    assert wait_until(lambda: arm.count("rejected_not_active") > ignored, 5)
    assert arm.fresh_diag()["state"] == "LATCHED"
    resp = arm.trigger("recover")
    assert not resp.success and "reset" in resp.message
    resp = arm.trigger("reset")
    assert resp.success, resp.message
    assert wait_until(lambda: arm.state() == "ACTIVE", 10)
    assert wait_until(lambda: within(arm.q(), nudge, 1e-3), 20, action=lambda: arm.send_joints(nudge))
