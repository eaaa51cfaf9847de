"""The way home around the workspace box: straight segments inside it, followed tick by tick
through the safety filter exactly as franka_node's homing does; refused where no way is found."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.envs.tasks.base import READY_Q
from rlinf_robot.safety import ArmAction, Rejection, RobotState, SafetyFilter, SafetyLimits
from rlinf_robot.safety.homing import NoWayHome, plan_home

LIMITS = SafetyLimits.from_yaml()
FILTER = SafetyFilter(LIMITS, control_hz=20.0)
#: Postures franka-sim's arm was left in by a runaway motion in starved hybrid runs: four joints
#: at their hardware stops, beyond the safety limits. Inside the box, where the straight joint path
#: home leaves it; and outside the box.
FAR_IN_BOX = [0.002, 1.784, 0.164, -0.145, -2.157, 4.52, 3.018]
FAR_OUT_OF_BOX = [-0.005, -0.257, 0.007, -3.046, -2.809, 3.673, -0.592]
BOXED_IN = [-0.0766, 1.3727, 1.6792, -0.7941, 1.5273, 1.7793, 1.9245]


def inside(q) -> bool:
    return FILTER.in_workspace(FILTER.tcp_position(q))


def track(q, target, ticks: int = 5000):
    """Each tick's filtered step towards ``target``; (where it ended, the joints it passed)."""
    q, passed = np.asarray(q, np.float64), []
    for _ in range(ticks):
        r = FILTER.check(ArmAction("joint_position", np.asarray(target)), RobotState(q))
        assert not isinstance(r, Rejection), r
        if np.max(np.abs(r.target - q)) < 1e-12:
            break
        q = r.target
        passed.append(q)
    return q, passed


def test_the_straight_path_home_stops_at_the_box_and_the_planned_one_gets_there_inside_it():
    q, _ = track(FAR_IN_BOX, READY_Q)
    assert np.max(np.abs(q - READY_Q)) > 0.5  # a plain joint target stops at the box edge
    waypoints = plan_home(LIMITS, np.array(FAR_IN_BOX), READY_Q)
    assert 2 <= len(waypoints) <= 4 and np.array_equal(waypoints[-1], READY_Q)
    q = np.array(FAR_IN_BOX)
    for w in waypoints:
        q, passed = track(q, w)
        assert np.max(np.abs(q - w)) < 1e-9 and all(inside(p) for p in passed)


def test_from_outside_the_box_the_way_home_only_gets_nearer_to_it_then_stays_inside():
    q, passed = np.array(FAR_OUT_OF_BOX), []
    for w in plan_home(LIMITS, q, READY_Q):
        q, more = track(q, w)
        passed += more
    assert np.max(np.abs(q - READY_Q)) < 1e-9
    first_in = next(i for i, p in enumerate(passed) if inside(p))
    viol = [float(np.sum(np.maximum(LIMITS.workspace_min - x, 0) + np.maximum(x - LIMITS.workspace_max, 0)))
            for x in map(FILTER.tcp_position, passed[:first_in + 1])]  # fmt: skip
    assert all(a > b for a, b in zip(viol, viol[1:], strict=False))
    assert all(inside(p) for p in passed[first_in:])


def test_a_straight_way_home_is_one_segment_and_a_boxed_in_arm_is_refused_naming_where_it_is():
    assert len(plan_home(LIMITS, READY_Q + 0.1, READY_Q)) == 1
    with pytest.raises(NoWayHome, match="guide the arm back by hand") as e:
        plan_home(LIMITS, np.array(BOXED_IN), READY_Q)
    assert "TCP (at" in str(e.value)
