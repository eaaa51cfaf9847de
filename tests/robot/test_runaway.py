"""RunawayGuard: a commanded velocity no planned motion reaches, held over several readings, stops
the motion; single-reading spikes (bunched commands on a starved machine) do not."""

from __future__ import annotations

import numpy as np

from rlinf_robot.robot.franka.link import ArmReading
from rlinf_robot.robot.franka.runaway import READINGS, RunawayGuard
from rlinf_robot.safety import SafetyLimits

V_MAX = SafetyLimits.from_yaml().joint_velocity_max


def reading(dq_d) -> ArmReading:
    z = np.zeros(7)
    return ArmReading(t=0.0, q=z, dq=z, q_d=z, dq_d=np.asarray(dq_d, np.float64), mode="Move")


def test_the_bound_is_twice_the_planners_top_speed_and_never_above_the_joint_limit():
    slow, full = RunawayGuard(V_MAX, 0.2), RunawayGuard(V_MAX, 1.0)
    assert np.allclose(slow.bound, V_MAX * 0.2 * 1.1 * 2.0)  # 1.15 rad/s on FR3 joints 1-4
    assert np.allclose(full.bound, V_MAX)


def test_spikes_pass_and_a_sustained_runaway_is_named():
    guard = RunawayGuard(V_MAX, 0.2)
    planned = np.full(7, 0.5)  # the planner's speed at factor 0.2: never a runaway
    runaway = np.array([-11.0, 0, 0, 0, 0, 0, 0])  # what franky commanded before the arm hit its stops
    for _ in range(10):
        assert guard.check(reading(planned)) is None
    for _ in range(3):  # spikes shorter than READINGS, between planned readings
        for _ in range(READINGS - 1):
            assert guard.check(reading(runaway)) is None
        assert guard.check(reading(planned)) is None
    why = [guard.check(reading(runaway)) for _ in range(READINGS)]
    assert why[:-1] == [None] * (READINGS - 1) and why[-1] is not None
    assert "joint 1 velocity -11.00 rad/s" in why[-1] and "1.15 rad/s" in why[-1], why[-1]
