"""Where a moving joint motion can come to rest: the target of a hold that never reverses.

"Hold at the current joints" is wrong for an arm in motion. The commanded trajectory is already
ahead of the measured joints and still carries velocity, so a motion to the measured (or even the
commanded) position has to brake *past* it and come back: against franka-sim, a link cut at
0.2 rad/s made the arm overshoot by 7 mrad and then drive back at 0.2 rad/s. A hold instead targets
the point where the commanded motion stops under the acceleration and jerk limits franky's planner
(Ruckig) uses for that motion, so every joint decelerates once, monotonically, and stays.

The estimate is the time-optimal jerk-limited stop. It errs long, never short: a joint that is
already decelerating is treated as if it first returned to zero acceleration, and the motion is
assumed to go on at its current velocity for ``latency_s`` (the state we read is a few ms old by
the time the new motion takes over: franka-sim showed 0.6 mrad of reversal at 0.2 rad/s without
it). That can add a little travel in the direction of motion but cannot make the planner reverse.

The commanded velocity and acceleration it starts from are bounded by what the planner can command
(the joint limits scaled by the dynamics factor, plus a margin). On a starved machine the arm's
reported ``dq_d`` / ``ddq_d`` (differences of commanded positions that arrived bunched) spiked far
beyond them, and the stop computed from such a spike was clipped to a joint limit: under a 1-CPU
cap a deadman hold swung joint 1 by 2.7 rad to its limit. Bounded, a hold moves a joint at most
the stop from the planner's largest speed (~0.08 rad on FR3 joint 1 at factor 0.2).
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)
#: How far beyond the scaled limits a commanded velocity / acceleration is still taken as given (a
#: planner's own rounding, a dynamics factor lowered mid-motion); anything beyond is clipped.
LIMIT_MARGIN = 0.1


def braking_distance(v: np.ndarray, a0: np.ndarray, a_max: np.ndarray, j_max: np.ndarray) -> np.ndarray:
    """Signed distance each joint travels before it rests, from velocity ``v`` and acceleration
    ``a0``, with the deceleration bounded by ``a_max`` and its rate by ``j_max`` (all per joint).

    >>> float(braking_distance(np.array([0.0]), np.array([0.0]), np.array([3.0]), np.array([1500.0]))[0])
    0.0
    >>> d = braking_distance(np.array([0.2, -0.2]), np.zeros(2), np.full(2, 3.0), np.full(2, 1500.0))
    >>> [round(float(x) * 1e3, 3) for x in d]  # v^2 / 2a + v a / 2j, in mrad
    [6.867, -6.867]
    >>> float(braking_distance(np.array([1e-3]), np.array([0.0]), np.array([3.0]), np.array([1500.0]))[0]) < 1e-6
    True
    """
    v = np.asarray(v, dtype=np.float64)
    a0 = np.asarray(a0, dtype=np.float64)
    a_max = np.asarray(a_max, dtype=np.float64)
    j_max = np.asarray(j_max, dtype=np.float64)
    if np.any(a_max <= 0) or np.any(j_max <= 0):
        raise ValueError("acceleration and jerk limits must be positive")
    sign = np.where(v != 0.0, np.sign(v), np.sign(a0))
    speed = np.abs(v)
    accel = np.maximum(sign * a0, 0.0)  # along the motion; a joint already braking counts as 0 (errs long)
    # phase 0: bring a positive acceleration back to zero (speed still grows meanwhile)
    t0 = accel / j_max
    d0 = speed * t0 + accel * t0**2 / 2.0 - j_max * t0**3 / 6.0
    v1 = speed + accel**2 / (2.0 * j_max)
    # phase 1: the time-optimal stop from v1 at zero acceleration
    full = v1 >= a_max**2 / j_max  # reaches full deceleration: ramp down, hold, ramp up
    d1 = np.where(
        full,
        v1**2 / (2.0 * a_max) + v1 * a_max / (2.0 * j_max),
        v1 * np.sqrt(v1 / j_max),  # triangular deceleration profile
    )
    return sign * (d0 + d1)


def braking_target(
    q_d: np.ndarray,
    dq_d: np.ndarray,
    ddq_d: np.ndarray,
    acc_limit: np.ndarray,
    jerk_limit: np.ndarray,
    dynamics_factor: float,
    q_lo: np.ndarray | None = None,
    q_hi: np.ndarray | None = None,
    latency_s: float = 0.01,
    vel_limit: np.ndarray | None = None,
) -> np.ndarray:
    """Joint target that stops the commanded motion (``q_d``, ``dq_d``, ``ddq_d``) with the robot's
    limits scaled by ``dynamics_factor``, ``latency_s`` after the state was read, clipped to the
    joint range when one is given. ``dq_d`` is bounded by ``vel_limit`` and ``ddq_d`` by
    ``acc_limit`` (both scaled, plus ``LIMIT_MARGIN``): see the module docstring."""
    if not 0.0 < dynamics_factor <= 1.0:
        raise ValueError(f"dynamics_factor must be in (0, 1], got {dynamics_factor!r}")
    scale = dynamics_factor * (1.0 + LIMIT_MARGIN)
    a_max = np.asarray(acc_limit, dtype=np.float64) * dynamics_factor
    dq_d = np.asarray(dq_d, dtype=np.float64)
    ddq_d = np.asarray(ddq_d, dtype=np.float64)
    bounded_dq = (
        dq_d
        if vel_limit is None
        else np.clip(dq_d, -np.asarray(vel_limit) * scale, np.asarray(vel_limit) * scale)
    )
    bounded_ddq = np.clip(ddq_d, -a_max * (1.0 + LIMIT_MARGIN), a_max * (1.0 + LIMIT_MARGIN))
    if np.any(bounded_dq != dq_d) or np.any(bounded_ddq != ddq_d):
        log.warning(
            "commanded state beyond the planner's limits (dq_d %s, ddq_d %s): braking from %s, %s",
            np.round(dq_d, 3),
            np.round(ddq_d, 2),
            np.round(bounded_dq, 3),
            np.round(bounded_ddq, 2),
        )
    target = (
        np.asarray(q_d, dtype=np.float64)
        + bounded_dq * latency_s
        + braking_distance(bounded_dq, bounded_ddq, a_max, np.asarray(jerk_limit) * dynamics_factor)
    )
    if q_lo is not None and q_hi is not None:
        target = np.clip(target, q_lo, q_hi)
    return target


def within_planner_limits(
    dq_d: np.ndarray,
    ddq_d: np.ndarray,
    vel_limit: np.ndarray,
    jerk_limit: np.ndarray,
    dynamics_factor: float,
) -> bool:
    """Whether a trajectory started from the commanded velocity and acceleration stays within the
    speed the planner can command (joint velocity limits x ``dynamics_factor``, +``LIMIT_MARGIN``).

    franky starts a motion that takes over a running one from the reported ``dq_d`` / ``ddq_d``. A
    velocity beyond the limit has to be shed at the acceleration limit (from 4 rad/s on FR3 joint 1
    at factor 0.2: 2.7 rad of travel); an acceleration is ramped back at the jerk limit, gaining
    up to ``ddq_d^2 / 2 j`` of speed meanwhile (a spike of 10-15 rad/s^2, common on a starved
    machine, adds < 0.1 rad/s and passes; 2,500 does not)."""
    v_max = np.asarray(vel_limit, dtype=np.float64) * dynamics_factor * (1.0 + LIMIT_MARGIN)
    j_max = np.asarray(jerk_limit, dtype=np.float64) * dynamics_factor
    ddq = np.asarray(ddq_d, dtype=np.float64)
    peak = np.abs(np.asarray(dq_d, dtype=np.float64)) + ddq * ddq / (2.0 * j_max)
    return bool(np.all(peak <= v_max))


def franky_braking_target(robot, dynamics_factor: float, q_lo=None, q_hi=None) -> np.ndarray:
    """``braking_target`` for a connected ``franky.Robot``: its newest commanded state and its own
    joint velocity / acceleration / jerk limits (the ones its planner scales by the dynamics factor)."""
    s = robot.state
    return braking_target(
        np.array(s.q_d),
        np.array(s.dq_d),
        np.array(s.ddq_d),
        np.array(robot.joint_acceleration_limit.get()),
        np.array(robot.joint_jerk_limit.get()),
        dynamics_factor,
        q_lo,
        q_hi,
        vel_limit=np.array(robot.joint_velocity_limit.get()),
    )
