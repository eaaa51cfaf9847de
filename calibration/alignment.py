"""Put a recording on the physics clock: how many 1 ms steps passed between two states.

A real FR3 runs its 1 kHz loop in lockstep with the client, one physics step per state. franka-sim
does not: its physics thread and its state stream are two ~1 kHz clocks, and on a loaded host the
physics stalls, drops its backlog or runs two steps between states. Replaying a recording one step
per state would then drift by the missing steps.

The step count is recoverable from the states themselves. MuJoCo's semi-implicit Euler moves
``q_{i+1} = q_i + dt * v_{i+1}``, so over ``n`` steps with velocity changing roughly linearly from
``v_a`` to ``v_b``:  ``q_b - q_a = dt * (n v_a + (n + 1) / 2 (v_b - v_a))``. The integer ``n`` that
fits best is the step count (exact when the arm moves; irrelevant when it stands still).
Intervals that fit poorly or span a long stall cut the recording into segments; each segment is
replayed from its own measured start state, so one doubtful interval cannot bias the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.replay import DT, Recording


@dataclass(frozen=True)
class StepTimeline:
    """``steps[k]``: physics steps between state k and k+1; ``fit[k]``: relative misfit of that count."""

    steps: np.ndarray
    fit: np.ndarray

    @property
    def index(self) -> np.ndarray:
        """Physics step of each state, counted from the first (length = number of states)."""
        return np.concatenate([[0], np.cumsum(self.steps)])


def estimate_steps(q: np.ndarray, dq: np.ndarray, dt: float = DT, max_steps: int = 32) -> StepTimeline:
    dqa = np.diff(q, axis=0)
    va, dv = dq[:-1], dq[1:] - dq[:-1]
    n = np.arange(max_steps + 1, dtype=np.float64)
    pred = dt * (n[None, :, None] * va[:, None, :] + (n[None, :, None] + 1) / 2 * dv[:, None, :])
    pred[:, 0, :] = 0.0
    err = ((dqa[:, None, :] - pred) ** 2).sum(axis=2)
    best = err.argmin(axis=1)
    # Relative misfit. A repeated state of a moving arm is a zero-step interval (the physics did
    # not advance); only an arm at rest fits any count, and then it is taken as one step.
    scale = (dqa**2).sum(axis=1)
    at_rest = (np.abs(dq[:-1]).max(axis=1) < 1e-6) & (np.abs(dq[1:]).max(axis=1) < 1e-6)
    fit = np.where(at_rest, 0.0, np.sqrt(err[np.arange(len(best)), best] / np.maximum(scale, 1e-300)))
    fit = np.where(~at_rest & (scale == 0), 0.0, fit)
    steps = np.where(at_rest, 1, best)
    return StepTimeline(steps=steps.astype(np.int64), fit=fit)


@dataclass(frozen=True)
class Segment:
    """States ``start..stop`` (inclusive) of one recording, replayed from the state at ``start``."""

    recording: int
    start: int
    stop: int


def plan_segments(
    timeline: StepTimeline,
    recording: int = 0,
    max_gap: int = 3,
    max_misfit: float = 0.05,
    min_states: int = 20,
    max_states: int = 1000,
) -> list[Segment]:
    """Cut at intervals longer than ``max_gap`` steps or fitting worse than ``max_misfit``."""
    bad = (timeline.steps > max_gap) | (timeline.fit > max_misfit)
    cuts = sorted({0, len(timeline.steps), *(np.flatnonzero(bad) + 1).tolist()})
    out = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        # States a..b-1 are joined by good intervals a..b-2; b-1 -> b is the bad one (or the end).
        last = b - 1 if b < len(timeline.steps) or bad[-1] else b
        while last - a > max_states:
            out.append(Segment(recording, a, a + max_states))
            a += max_states
        if last - a >= min_states:
            out.append(Segment(recording, a, last))
    return out


def segment_commands(rec: Recording, timeline: StepTimeline, seg: Segment, delay: int = 1) -> np.ndarray:
    """The command on each physics step of ``seg``: the latest state's echo at least ``delay`` steps old.

    State k is read before its step runs; the command answering it reaches the physics thread
    for the following step (``delay = 1``).
    """
    index = timeline.index
    steps = np.arange(index[seg.start], index[seg.stop])
    which = np.searchsorted(index + delay, steps, side="right") - 1
    return rec.dq_cmd[np.clip(which, 0, len(rec) - 1)]


def segment_targets(timeline: StepTimeline, seg: Segment) -> tuple[np.ndarray, np.ndarray]:
    """(replay output rows, state indices) to compare: replay row ``i`` is the state after step i."""
    index = timeline.index
    states = np.arange(seg.start + 1, seg.stop + 1)
    rows = index[states] - index[seg.start] - 1
    keep = rows >= 0
    return rows[keep], states[keep]
