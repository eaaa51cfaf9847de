"""The hold target: where a moving joint can come to rest without reversing (no robot needed)."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlinf_robot.robot.franka import braking
from rlinf_robot.robot.franka.braking import braking_distance, braking_target, within_planner_limits

A, J = 3.0, 1500.0  # FR3 joint 1 at relative dynamics 0.2


def _simulate_stop(v: float, a0: float, a_max: float, j_max: float, dt: float = 1e-6) -> float:
    """Distance of a time-optimal jerk-limited stop, integrated step by step (v > 0): decelerate
    as hard as the limits allow while the remaining speed still needs it."""
    x, a = 0.0, a0
    while v > 0.0:
        # speed lost if the deceleration were released now (ramping a back to 0 at max jerk)
        release = a * a / (2.0 * j_max) if a < 0 else 0.0
        jerk = j_max if v <= release else -j_max
        a = float(np.clip(a + jerk * dt, -a_max, a_max))
        v += a * dt
        x += v * dt
    return x


def test_doctests():
    assert doctest.testmod(braking).failed == 0


@pytest.mark.parametrize("v", [0.001, 0.006, 0.05, 0.2, 1.0])
def test_matches_an_integrated_jerk_limited_stop(v):
    d = float(braking_distance(np.array([v]), np.array([0.0]), np.array([A]), np.array([J]))[0])
    assert d == pytest.approx(_simulate_stop(v, 0.0, A, J), rel=0.02, abs=2e-6)


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-4, 1.0), st.floats(-3.0, 3.0))
def test_errs_long_never_short(v, a0):
    """Already accelerating or already braking: never short of the real stop (short = reversal)."""
    d = float(braking_distance(np.array([v]), np.array([a0]), np.array([A]), np.array([J]))[0])
    assert d >= _simulate_stop(v, a0, A, J, dt=2e-5) - 2e-5


@given(st.floats(-2.0, 2.0), st.floats(-3.0, 3.0))
def test_symmetric_in_direction(v, a0):
    fwd = braking_distance(np.array([v]), np.array([a0]), np.array([A]), np.array([J]))
    back = braking_distance(np.array([-v]), np.array([-a0]), np.array([A]), np.array([J]))
    assert fwd[0] == pytest.approx(-back[0])


def test_target_adds_latency_travel_scales_with_dynamics_and_respects_the_joint_range():
    q, dq, ddq = np.zeros(7), np.r_[0.2, np.zeros(6)], np.zeros(7)
    acc, jerk = np.full(7, 15.0), np.full(7, 7500.0)
    slow = braking_target(q, dq, ddq, acc, jerk, 0.2, latency_s=0.0)
    fast = braking_target(q, dq, ddq, acc, jerk, 1.0, latency_s=0.0)
    assert 0 < fast[0] < slow[0] and np.all(slow[1:] == 0)
    assert braking_target(q, dq, ddq, acc, jerk, 0.2)[0] == pytest.approx(slow[0] + 0.002)
    clipped = braking_target(q, dq, ddq, acc, jerk, 0.2, q_lo=np.full(7, -1.0), q_hi=np.full(7, 0.001))
    assert clipped[0] == 0.001
    with pytest.raises(ValueError, match="dynamics_factor"):
        braking_target(q, dq, ddq, acc, jerk, 0.0)


def test_a_spiked_commanded_state_brakes_within_the_planners_reach():
    """On a starved machine the reported dq_d / ddq_d spiked (commanded positions arriving bunched)
    and the stop computed from them was the joint limit: a hold swung joint 1 by 2.7 rad. Bounded by
    what the planner can command, the target stays within the stop from its top speed."""
    vel, acc, jerk = np.full(7, 2.62), np.full(7, 15.0), np.full(7, 7500.0)
    q_lo, q_hi = np.full(7, -2.7), np.full(7, 2.7)
    q = np.zeros(7)
    spiked = braking_target(
        q, np.r_[-4.0, np.zeros(6)], np.r_[-2500.0, np.zeros(6)], acc, jerk, 0.2, q_lo, q_hi, vel_limit=vel
    )
    top = braking_target(
        q, np.r_[-2.62 * 0.22, np.zeros(6)], np.r_[-15 * 0.22, np.zeros(6)], acc, jerk, 0.2, vel_limit=vel
    )
    assert spiked[0] == pytest.approx(top[0]) and -0.1 < top[0] < 0 and np.all(spiked[1:] == 0)
    # within the limits nothing changes
    calm = (q, np.r_[0.3, np.zeros(6)], np.r_[1.0, np.zeros(6)], acc, jerk, 0.2)
    assert np.array_equal(braking_target(*calm, vel_limit=vel), braking_target(*calm))


def test_a_takeover_needs_a_commanded_state_the_planner_can_have_produced():
    """franky starts a takeover from the reported dq_d / ddq_d: a state whose trajectory would
    exceed the scaled speed limit (+10 %) defers it (the running motion goes on, the next tick
    tries again); the acceleration spikes a starved machine shows at cruising speed pass."""
    vel, jerk = np.full(7, 2.175), np.full(7, 7500.0)  # franky's FR3 joint 1-4 limits

    def ok(dq, ddq, factor=0.2):
        return within_planner_limits(np.r_[dq, np.zeros(6)], np.r_[ddq, np.zeros(6)], vel, jerk, factor)

    assert ok(0.435, 3.0) and ok(0.38, -10.6) and ok(0.381, -15.4)  # seen under the cap
    assert not ok(4.0, 0.0) and not ok(0.1, -2500.0) and not ok(0.6, 0.0)
    assert ok(2.0, 0.0, factor=1.0)
