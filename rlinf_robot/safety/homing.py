"""The way home: joint waypoints whose straight segments keep the TCP inside the workspace box.

Homing tracks its target through the safety filter like any command, and the filter clamps each
tick's step into the box. From a posture where the straight joint path home leaves the box (a
runaway motion left franka-sim's arm at its joint stops; a policy can reach such postures too), the
clamped homing stood at the box edge until it timed out, every try. ``plan_home`` finds a way
around, once, before the homing starts:

1. a greedy walk in steps of ``STEP`` rad: of the straight step, the step on every joint but one
   and the step on one joint alone, the one that gets closest to the goal (L1 over the joints) with
   the TCP inside the box (from outside it: nearer to it);
2. string pulling: from each waypoint, the farthest point of that walk a straight segment reaches
   inside the box, so the arm moves along a few straight lines, not the walk's zig-zag (a target
   that changes direction every tick makes franky's takeovers command runaway velocities).

The box is shrunk by ``MARGIN`` for planning: the filter checks each tick's target on the exact
box, and franky's trajectory between those targets is not a straight line (the commanded TCP
strayed ~2 cm off a segment on franka-sim). A posture the walk cannot free (2 of 60 random in-box
postures on the default limits) is refused, naming where the arm is, rather than held.
"""

from __future__ import annotations

import numpy as np

from rlinf_robot.robot.franka import model
from rlinf_robot.safety.limits import SafetyLimits

STEP = 0.02  # rad: the walk's largest joint move per step
MARGIN = 0.02  # m: planning box inside the filter's (franky's trajectory strays off a segment)
SAMPLE = 0.005  # rad: largest joint move between the points a segment is checked at
MAX_STEPS = 4000


class NoWayHome(ValueError):
    """No joint can move towards the goal with the TCP inside the box."""


def plan_home(limits: SafetyLimits, q: np.ndarray, goal: np.ndarray) -> list[np.ndarray]:
    """Waypoints from ``q`` to ``goal`` (the last one is ``goal``); ``[goal]`` when the straight
    path stays inside the box. Raises ``NoWayHome``."""
    q, goal = np.asarray(q, np.float64), np.asarray(goal, np.float64)
    box = _Box(limits)
    if box.segment_ok(q, goal):
        return [goal]
    walk = _walk(box, q, goal)
    waypoints, i = [], 0
    while i < len(walk) - 1:
        j = len(walk) - 1
        while j > i + 1 and not box.segment_ok(walk[i], walk[j]):
            j -= 1
        waypoints.append(walk[j])
        i = j
    return waypoints


def _walk(box: _Box, q: np.ndarray, goal: np.ndarray) -> list[np.ndarray]:
    eye = np.eye(7, dtype=bool)
    masks = [np.ones(7, dtype=bool), *~eye, *eye]
    walk = [q]
    for _ in range(MAX_STEPS):
        if np.max(np.abs(goal - q)) < 1e-12:
            return walk
        need = float(np.sum(np.abs(goal - q)))
        best, best_gain = None, 0.01 * STEP
        for mask in masks:
            d = np.where(mask, goal - q, 0.0)
            t = q + d / max(1.0, float(np.max(np.abs(d))) / STEP)
            gain = need - float(np.sum(np.abs(goal - t)))
            if gain > best_gain and box.step_ok(q, t):
                best, best_gain = t, gain
        if best is None:
            raise NoWayHome(
                f"no joint can move towards home from {np.round(q, 3).tolist()} with the TCP (at "
                f"{np.round(model.tcp_position(q, box.limits.tcp_offset), 3).tolist()}) inside the workspace box: guide the arm back by hand"
            )
        q = best
        walk.append(q)
    raise NoWayHome(f"no way home within {MAX_STEPS} steps of {STEP} rad")


class _Box:
    def __init__(self, limits: SafetyLimits):
        self.limits = limits

    def violation(self, q: np.ndarray) -> float:
        return self.limits.box_violation(model.tcp_position(q, self.limits.tcp_offset), MARGIN)

    def step_ok(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Inside the box at ``b``, or (from outside it) nearer to it than at ``a``."""
        vb = self.violation(b)
        return vb == 0.0 or vb < self.violation(a)

    def segment_ok(self, a: np.ndarray, b: np.ndarray) -> bool:
        n = max(1, int(np.ceil(float(np.max(np.abs(b - a))) / SAMPLE)))
        points = a + np.linspace(0.0, 1.0, n + 1)[:, None] * (b - a)
        return all(self.step_ok(p, r) for p, r in zip(points[:-1], points[1:], strict=True))
