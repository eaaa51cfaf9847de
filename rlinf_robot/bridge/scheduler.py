"""When each action of a chunk runs: alignment, replacement, and dropping what is too late.

Pure logic on integer nanoseconds of the robot's monotonic clock (no sockets, no arm), so every
timing rule is unit-tested by feeding times directly.

Step ``k`` of a chunk owns the slot ``[t0 + k*T, t0 + (k+1)*T)`` (``T = 1/rate_hz``). ``t0`` is:
- ``first_action_time_ns`` when the client set one (a chunk past it by more than one period is
  dropped, never executed late; a future one waits, and the current chunk runs until then);
- with ``align``, the capture time of the observation ``obs_seq`` it was computed from, so the steps
  whose slots elapsed while the learner was thinking are skipped (latency-aware replacement);
- otherwise the time it arrived.
A newly accepted chunk replaces the rest of the current one from its aligned step. When the loop
is late and several slots passed, only the newest due step runs (the others are counted skipped):
an old target is never executed late.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlinf_robot.protocol import ActionChunk


@dataclass
class Plan:
    """An accepted chunk and how far it got."""

    seq: int
    mode: str
    actions: np.ndarray  # [H, D] float64 (own copy: the wire buffer is not kept)
    gripper: bool
    t0_ns: int
    period_ns: int
    next_step: int
    rate_hz: float = 0.0
    hops: dict[str, int] = field(default_factory=dict)
    applied: int = 0
    last_index: int = -1  # the last row applied
    #: Delta chunks, resolved at acceptance (``bridge.motion``): the anchor and each row's target.
    anchor: np.ndarray | None = None
    targets: np.ndarray | None = None  # [H, 7] joint targets
    widths: np.ndarray | None = None  # [H] finger openings, with a gripper column
    report: dict[str, int] = field(default_factory=dict)  # sent with observations (chunk_report)
    trace: list[np.ndarray] = field(default_factory=list)  # the arm after each slot (chunk_trace)

    @property
    def horizon(self) -> int:
        return int(self.actions.shape[0])

    @property
    def start_ns(self) -> int:
        return self.t0_ns + self.next_step * self.period_ns

    @property
    def end_ns(self) -> int:
        return self.t0_ns + self.horizon * self.period_ns


@dataclass(frozen=True)
class Accepted:
    plan: Plan
    skipped: int  # steps whose slots had already elapsed
    pending: bool  # starts in the future


@dataclass(frozen=True)
class Dropped:
    reason: str  # counter name: "old_seq", "late", "stale_obs", "unknown_obs"
    detail: str

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class StepDue:
    plan: Plan
    index: int
    skipped: int  # due steps passed over because the loop was late

    @property
    def row(self) -> np.ndarray:
        return self.plan.actions[self.index]


class ChunkScheduler:
    """Holds the executing plan and at most one pending (future-start) plan."""

    def __init__(self, max_obs_age_ns: int):
        self.max_obs_age_ns = int(max_obs_age_ns)
        self.last_seq = -1
        self.current: Plan | None = None
        self.pending: Plan | None = None
        self.skipped_steps = 0  # due steps never run because the loop was late
        self.ended: list[Plan] = []  # plans whose last slot passed; the caller pops them

    @property
    def active(self) -> bool:
        return self.current is not None or self.pending is not None

    def offer(self, chunk: ActionChunk, now_ns: int, obs_stamp_ns: int | None) -> Accepted | Dropped:
        """Accept or drop ``chunk`` arriving at ``now_ns``; ``obs_stamp_ns`` is the capture time of
        observation ``chunk.obs_seq`` (None when the server has no record of it)."""
        if chunk.seq <= self.last_seq:
            return Dropped("old_seq", f"chunk seq {chunk.seq} is not newer than {self.last_seq}")
        if obs_stamp_ns is None:
            return Dropped("unknown_obs", f"observation {chunk.obs_seq} is unknown or too old")
        if now_ns - obs_stamp_ns > self.max_obs_age_ns:
            age_ms = (now_ns - obs_stamp_ns) / 1e6
            return Dropped("stale_obs", f"computed from observation {chunk.obs_seq}, {age_ms:.0f} ms old")
        period = max(1, round(1e9 / chunk.rate_hz))
        horizon = chunk.horizon
        if chunk.first_action_time_ns > 0:
            t0 = int(chunk.first_action_time_ns)
            if now_ns - t0 > period:
                return Dropped("late", f"first action time passed {(now_ns - t0) / 1e6:.1f} ms ago")
        elif chunk.align:
            t0 = int(obs_stamp_ns)
        else:
            t0 = now_ns
        k0 = max(0, (now_ns - t0) // period)
        if k0 >= horizon:
            return Dropped("late", f"all {horizon} steps elapsed before it arrived")
        plan = Plan(
            seq=chunk.seq,
            mode=chunk.control_mode,
            actions=np.array(chunk.actions, dtype=np.float64),
            gripper=bool(chunk.gripper),
            t0_ns=t0,
            period_ns=period,
            next_step=int(k0),
            rate_hz=float(chunk.rate_hz),
            hops=dict(chunk.hops),
        )
        self.last_seq = chunk.seq
        if plan.start_ns > now_ns:
            self.pending = plan
            return Accepted(plan, skipped=int(k0), pending=True)
        self.current, self.pending = plan, None
        return Accepted(plan, skipped=int(k0), pending=False)

    def due(self, now_ns: int) -> StepDue | None:
        """The step to apply now, if any. Finishes the plan once its last slot has passed."""
        if self.pending is not None and now_ns >= self.pending.start_ns:
            self.current, self.pending = self.pending, None
        plan = self.current
        if plan is None:
            return None
        k = (now_ns - plan.t0_ns) // plan.period_ns
        if k >= plan.horizon:
            self.skipped_steps += plan.horizon - plan.next_step
            plan.next_step = plan.horizon
            self.current = None
            self.ended.append(plan)
            return None
        if k < plan.next_step:
            return None
        skipped = int(k - plan.next_step)
        self.skipped_steps += skipped
        plan.next_step = int(k) + 1
        return StepDue(plan, int(k), skipped)

    def next_deadline_ns(self) -> int | None:
        """When ``due`` next has something to do (a step slot or the end of the plan)."""
        times = []
        if self.pending is not None:
            times.append(self.pending.start_ns)
        if self.current is not None:
            plan = self.current
            times.append(plan.start_ns if plan.next_step < plan.horizon else plan.end_ns)
        return min(times) if times else None

    def cancel(self) -> Plan | None:
        """Drop everything (deadman, stop, lease loss). Returns the plan that was executing."""
        plan, pending = self.current, self.pending
        for cut in (plan, pending):
            if cut is not None:  # its report says it was cut short, not only how far it got
                cut.report["cut"] = 1
        self.current, self.pending = None, None
        return plan
