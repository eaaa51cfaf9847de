"""``Motion``: everything in the bridge server that moves the arm, in one object that owns its state.

It holds the chunk scheduler, the commanded joint target, the delta rule and the safety filter per
control rate, and the one way to stop (``hold``). The server's I/O thread calls it in this order,
top to bottom:

1. ``accept(chunk)`` - the scheduler decides when the chunk runs (or drops it); a delta chunk is
   resolved at once into joint targets by ``rlinf_robot.safety.deltas`` (the rule the sims apply),
   anchored at the last commanded target, so its rows add up exactly to their sum;
2. ``run_due(now)`` - applies the step whose slot has come: the target must pass the safety filter
   and the arm's state must be fresh; it records the arm's state at every slot boundary (the chunk's *trace*);
3. ``hold(reason)`` - cancels everything and asks the backend to brake.

Everything here runs on the server's single I/O thread: no locks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from rlinf_robot.bridge.backend import ArmBackend
from rlinf_robot.bridge.events import EventLog
from rlinf_robot.bridge.latency import HopLatencies
from rlinf_robot.bridge.scheduler import Accepted, ChunkScheduler, Dropped, Plan, StepDue
from rlinf_robot.protocol import ActionChunk, Error
from rlinf_robot.protocol.messages import CONTROL_MODE_WIDTH, TRACE_WIDTH
from rlinf_robot.robot.franka import model
from rlinf_robot.safety import ArmAction, RobotState, SafeAction, SafetyFilter, SafetyLimits
from rlinf_robot.safety.deltas import DELTA_WIDTH, DeltaRule

log = logging.getLogger("rlinf_robot.bridge.server")
_MAX_CACHED_RATES = 16


def trace_row(state: RobotState) -> np.ndarray:
    """One ``chunk_trace`` row (``protocol.messages.TRACE_COLUMNS``) from a backend state."""
    q = np.asarray(state.joint_pos, np.float64)
    ee = model.tcp_pose(q) if state.ee_pose is None else np.asarray(state.ee_pose, np.float64)
    return np.concatenate([q, ee, [float(state.gripper_width)]])


class Motion:
    def __init__(
        self,
        backend: ArmBackend,
        limits: SafetyLimits,
        max_obs_age_ns: int,
        events: EventLog,
        latency: HopLatencies,
        count: Callable[..., None],
    ):
        self.backend = backend
        self.limits = limits
        self.scheduler = ChunkScheduler(max_obs_age_ns)
        self.events, self.latency, self._count = events, latency, count
        self.commanded: np.ndarray | None = None  # last joint target sent; None after a hold
        self.latest: Plan | None = None  # newest accepted plan: its report and trace go out
        self._filters: dict[float, SafetyFilter] = {}
        self._rules: dict[tuple[str, bool, float], DeltaRule] = {}

    @property
    def active(self) -> bool:
        return self.scheduler.active

    def filters(self) -> list[SafetyFilter]:
        return list(self._filters.values())

    # ------------------------------------------------------------------ 1. accept
    def accept(self, chunk: ActionChunk, now_ns: int, obs_stamp_ns: int | None) -> Accepted | Dropped:
        result = self.scheduler.offer(chunk, now_ns, obs_stamp_ns)
        if isinstance(result, Dropped):
            return result
        plan = result.plan
        plan.report = {"rows": plan.horizon, "applied": 0, "skipped": result.skipped}
        if plan.mode in DELTA_WIDTH:
            state = self.backend.state()
            if state is None:
                self.scheduler.cancel()
                return Dropped("no_state", "no fresh robot state to anchor a delta chunk at")
            rule = self._rule(plan.mode, plan.gripper, plan.rate_hz)
            plan.anchor = rule.anchor(self.commanded, state.joint_pos)
            # 1: the arm lagged its last target by more than the lead, so row 0 starts nearer the arm
            lead_clamped = int(rule.lead_exceeded(self.commanded, state.joint_pos))
            if lead_clamped:
                self._count("chunks_lead_clamped")
            resolved = rule.plan(plan.anchor, plan.actions)
            plan.targets, plan.widths = resolved.targets, resolved.widths
            plan.report.update(
                scaled=int(resolved.scaled.sum()),
                clamped=int(resolved.clamped.sum()),
                lead_clamped=lead_clamped,
            )
        self.latest = plan
        return result

    # ------------------------------------------------------------------ 2. run
    def run_due(self, now_ns: int, refuse: Callable[[Error], None]) -> bool:
        """Apply the step that is due, if any; returns True when a chunk has just ended."""
        due = self.scheduler.due(now_ns)
        if due is not None:
            self._trace_until(due.plan, due.index)
            self._apply(due, refuse)
        ended = False
        while self.scheduler.ended:
            plan = self.scheduler.ended.pop()
            if plan.targets is not None and plan.last_index < plan.horizon - 1:
                # A late loop skipped the last rows' slots: a delta plan's targets are cumulative,
                # so its final target is where the chunk says the arm should be now, not an old
                # command. Send it, or the chunk would fall short of its row sum.
                self._apply(StepDue(plan, plan.horizon - 1, plan.horizon - 1 - plan.last_index), refuse)
            self._trace_until(plan, plan.horizon)
            self.events.add("chunk_done", seq=plan.seq, applied=plan.applied)
            ended = True
        return ended

    def _apply(self, due: StepDue, refuse: Callable[[Error], None]) -> None:
        plan = due.plan
        state = self.backend.state()
        if state is None:
            self._count("steps_no_state")
            self.hold("no_state")
            refuse(Error(code="no_state", message="no fresh robot state; holding", ref_seq=plan.seq))
            return
        decision = self._check(plan, due.index, state)
        if not decision:
            self._count("steps_rejected")
            self.hold("unsafe")
            self.events.add("step_rejected", seq=plan.seq, step=due.index, reason=decision.reason)
            refuse(
                Error(
                    code="unsafe",
                    message=f"step {due.index}: {decision.reason}: {decision.detail}",
                    field="$.actions",
                    ref_seq=plan.seq,
                )
            )
            return
        if not self.safe_backend(self.backend.apply, decision):
            self.hold("backend_error")
            return
        self.commanded = np.array(decision.target) if decision.mode == "joint_position" else None
        self._count("steps_applied")
        slot_ns = plan.t0_ns + due.index * plan.period_ns
        self.events.add("step_applied", seq=plan.seq, step=due.index, skipped=due.skipped, slot_ns=slot_ns)
        if plan.applied == 0:
            plan.hops["action_applied"] = time.time_ns()
            self.latency.record(plan.hops)
        plan.applied += 1
        plan.last_index = due.index
        plan.report["applied"] = plan.applied
        plan.report["skipped"] = plan.report.get("skipped", 0) + due.skipped

    def _check(self, plan: Plan, index: int, state: RobotState):
        """The safety filter's verdict on step ``index``: a delta plan's joint target (its step
        bounded by the rule already) gets the absolute checks; other modes the full check against
        the current state."""
        width = CONTROL_MODE_WIDTH[plan.mode]
        row = plan.actions[index]
        gripper = float(row[width]) if plan.gripper else None
        rules = self._filter(plan.rate_hz)
        if plan.targets is None:
            return rules.check(ArmAction(plan.mode, row[:width], gripper), state)
        target = plan.targets[index]
        width_cmd = None if plan.widths is None else float(plan.widths[index])
        decision = rules.check_target(target, width_cmd)
        if isinstance(decision, SafeAction) and plan.mode != decision.source_mode:
            decision = SafeAction(
                decision.mode, decision.target, decision.gripper, plan.mode, decision.adjustments
            )
        return decision

    def _trace_until(self, plan: Plan, index: int) -> None:
        """Record the arm's state for every slot of ``plan`` before ``index`` not yet recorded."""
        if len(plan.trace) >= index:
            return
        state = self.backend.state()
        row = trace_row(state) if state is not None else np.full(TRACE_WIDTH, np.nan)
        while len(plan.trace) < index:
            plan.trace.append(row)

    # ------------------------------------------------------------------ 3. hold
    def hold(self, reason: str) -> None:
        plan = self.scheduler.cancel()
        self.commanded = None
        self.safe_backend(self.backend.hold)
        self.events.add("hold", reason=reason, had_plan=plan is not None)

    def forget_target(self) -> None:
        """The arm was moved by something else (home, reset, recover, stop): no anchor to keep."""
        self.commanded = None

    # ------------------------------------------------------------------ what observations carry
    def chunk_fields(self) -> dict:
        """``chunk_seq``, ``chunk_active``, ``chunk_report`` and, once it ended, ``chunk_trace``."""
        out: dict = {"chunk_seq": self.scheduler.last_seq, "chunk_active": self.scheduler.active}
        plan = self.latest
        if plan is not None and plan.seq == self.scheduler.last_seq:
            out["chunk_report"] = dict(plan.report)
            running = plan is self.scheduler.current or plan is self.scheduler.pending
            if not running and plan.trace:
                out["chunk_trace"] = np.stack(plan.trace)
        return out

    # ------------------------------------------------------------------ helpers
    def safe_backend(self, fn, *args) -> bool:
        try:
            fn(*args)
            return True
        except Exception as e:
            self._count("backend_errors")
            log.error("backend %s failed: %s", getattr(fn, "__name__", fn), e)
            return False

    def _filter(self, rate_hz: float) -> SafetyFilter:
        f = self._filters.get(rate_hz)
        if f is None:
            if len(self._filters) >= _MAX_CACHED_RATES:
                self._filters.clear()
            f = self._filters[rate_hz] = SafetyFilter(self.limits, control_hz=rate_hz)
        return f

    def _rule(self, mode: str, gripper: bool, rate_hz: float) -> DeltaRule:
        key = (mode, bool(gripper), float(rate_hz))
        rule = self._rules.get(key)
        if rule is None:
            if len(self._rules) >= _MAX_CACHED_RATES:
                self._rules.clear()
            rule = self._rules[key] = DeltaRule(mode, gripper, rate_hz, self.limits)
        return rule
