"""RunawayGuard: commanded positions moving faster than any planned motion, over several of the
loop's readings, stop the motion; a single late jump (bunched commands on a starved machine) and
the reported ``dq_d`` spikes do not count."""

from __future__ import annotations

import numpy as np

from rlinf_robot.robot.franka.link import ArmReading
from rlinf_robot.robot.franka.runaway import READINGS, RunawayGuard
from rlinf_robot.safety import SafetyLimits

V_MAX = SafetyLimits.from_yaml().joint_velocity_max
PERIOD = 0.01  # s between the loop's readings at 100 Hz


def readings(velocities, dq_d_spike: float = 0.0):
    """Readings every PERIOD whose commanded joint 1 moves at each of ``velocities`` (rad/s)."""
    q, t = np.zeros(7), 0.0
    for v in velocities:
        t += PERIOD
        q = q + np.array([v * PERIOD, 0, 0, 0, 0, 0, 0])
        dq_d = np.array([v + dq_d_spike, 0, 0, 0, 0, 0, 0])
        yield ArmReading(t=t, q=q.copy(), dq=dq_d, q_d=q.copy(), dq_d=dq_d, mode="Move")


def test_the_bounds_are_multiples_of_the_planners_top_speed_never_above_the_joint_limit():
    slow, full = RunawayGuard(V_MAX, 0.2), RunawayGuard(V_MAX, 1.0)
    assert np.allclose(slow.bound, V_MAX * 0.2 * 1.1 * 4.0)  # 2.3 rad/s on FR3 joints 1-4
    assert np.allclose(slow.measured_bound, V_MAX * 0.2 * 1.1 * 2.0)  # 1.15 rad/s
    assert np.allclose(full.bound, V_MAX) and np.allclose(full.measured_bound, V_MAX)


def test_planned_motion_and_reported_spikes_pass_a_sustained_runaway_is_named():
    guard = RunawayGuard(V_MAX, 0.2)
    # the planner's speed, with dq_d spiking to 3x it (seen at the start of ordinary moves)
    assert all(guard.check(r) is None for r in readings([0.5] * 20, dq_d_spike=1.0))
    # one late jump between planned readings is not a runaway
    assert all(guard.check(r) is None for r in readings([0.5, 3.0, 0.5] * 5))
    why = [guard.check(r) for r in readings([0.5] + [-11.0] * READINGS)]
    assert why[:-1] == [None] * READINGS and why[-1] is not None
    assert "joint 1 moving at -11.00 rad/s" in why[-1] and "2.31 rad/s" in why[-1], why[-1]


def test_velocity_is_taken_over_the_controllers_clock_not_over_when_we_read():
    """Under a 1-CPU cap our reads lag the states they return: two states 10 ms apart on the
    controller's clock may be read 1 ms apart. Over the controller's clock the move is planned."""
    guard = RunawayGuard(V_MAX, 0.2)
    q = np.zeros(7)
    for k in range(20):
        q = q + np.array([0.5 * PERIOD, 0, 0, 0, 0, 0, 0])  # 0.5 rad/s on the controller's clock
        read_at = 0.001 * k if k % 2 else 0.02 * k  # bunched reads
        r = ArmReading(t=read_at, q=q, dq=q, q_d=q.copy(), dq_d=q, mode="Move", robot_t=PERIOD * (k + 1))
        assert guard.check(r) is None


def test_commands_caught_up_in_a_burst_that_the_arm_does_not_follow_do_not_count():
    guard = RunawayGuard(V_MAX, 0.2)
    q_d, q = np.zeros(7), np.zeros(7)
    for k in range(20):
        q_d = q_d + np.array([-11.0 * PERIOD, 0, 0, 0, 0, 0, 0])  # commands far ahead ...
        q = q + np.array([-0.5 * PERIOD, 0, 0, 0, 0, 0, 0])  # ... the arm at its planned speed
        r = ArmReading(t=PERIOD * k, q=q.copy(), dq=q, q_d=q_d.copy(), dq_d=q, mode="Move")
        assert guard.check(r) is None
