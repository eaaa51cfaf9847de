"""The motion half of the bridge server: deadman, holding, and applying scheduled steps.

A mixin of ``BridgeServer`` (it shares the server's single I/O thread and state); split out so
the rules that decide whether the arm moves read in one place: only the lease holder, never while
latched, busy or faulted, never on a stale robot state, and only what the safety filter accepts.
"""

from __future__ import annotations

import logging
import time

from rlinf_robot.bridge.scheduler import StepDue
from rlinf_robot.protocol import Error
from rlinf_robot.protocol.messages import CONTROL_MODE_WIDTH
from rlinf_robot.safety import ArmAction, SafetyFilter

log = logging.getLogger("rlinf_robot.bridge.server")


class ControlMixin:
    def _motion_refusal(self, peer) -> tuple[str, str] | None:
        if not self.lease.held_by(peer.client_id, peer.key):
            holder = self.lease.holder or "nobody"
            return "refused", f"{peer.client_id} does not hold the control lease (held by {holder})"
        if self.estop.latched:
            return "latched", f"e-stop latched ({self.estop.reason}); send reset"
        if self._busy is not None:
            return "busy", f"{self._busy[2].name} in progress"
        fault = self.backend.fault_state()
        if fault:
            return "fault", f"arm is in {fault}"
        return None

    def _deadman_deadline_ns(self) -> int | None:
        if not self.lease.holder or self._link_lost:
            return None
        return self._last_feed_ns + int(self.config.deadman_ms * 1e6) + 1

    def _feed(self, now: int) -> None:
        self.watchdog.feed(now / 1e9)
        self._last_feed_ns = now
        if self._link_lost:
            self._link_lost = False
            self.events.add("link_restored")

    def _check_deadman(self, now: int) -> None:
        if not self.lease.holder or self._link_lost or not self.watchdog.expired(now / 1e9):
            return
        self._link_lost = True
        self._hold("deadman")
        self.events.add("deadman", last_feed_ns=self._last_feed_ns, holder=self.lease.holder)
        log.warning(
            "deadman: no heartbeat or chunk from %s for %.0f ms; holding",
            self.lease.holder,
            (time.monotonic_ns() - self._last_feed_ns) / 1e6,
        )
        self._broadcast_status("deadman: link to the lease holder lost")

    def _hold(self, reason: str) -> None:
        plan = self.scheduler.cancel()
        self._safe_backend(self.backend.hold)
        self.events.add("hold", reason=reason, had_plan=plan is not None)

    def _safe_backend(self, fn, *args) -> bool:
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
            with self._lock:
                if len(self._filters) > 16:
                    self._filters.clear()
                f = self._filters[rate_hz] = SafetyFilter(self.limits, control_hz=rate_hz)
        return f

    def _run_steps(self, now: int) -> None:
        due = self.scheduler.due(now)
        if due is not None:
            self._apply_step(due)
        while self.scheduler.ended:
            plan = self.scheduler.ended.pop()
            self.events.add("chunk_done", seq=plan.seq, applied=plan.applied)
            self._next_obs_ns = now  # an observation right at the end of a chunk

    def _apply_step(self, due: StepDue) -> None:
        plan = due.plan
        state = self.backend.state()
        if state is None:
            self._count("steps_no_state")
            self._hold("no_state")
            self._reply_holder(
                Error(code="no_state", message="no fresh robot state; holding", ref_seq=plan.seq)
            )
            return
        width = CONTROL_MODE_WIDTH[plan.mode]
        row = due.row
        action = ArmAction(plan.mode, row[:width], float(row[width]) if plan.gripper else None)
        decision = self._filter(plan.rate_hz).check(action, state)
        if not decision:
            self._count("steps_rejected")
            self._hold("unsafe")
            self.events.add("step_rejected", seq=plan.seq, step=due.index, reason=decision.reason)
            self._reply_holder(
                Error(
                    code="unsafe",
                    message=f"step {due.index}: {decision.reason}: {decision.detail}",
                    field="$.actions",
                    ref_seq=plan.seq,
                )
            )
            return
        if not self._safe_backend(self.backend.apply, decision):
            self._hold("backend_error")
            return
        self._count("steps_applied")
        slot_ns = plan.t0_ns + due.index * plan.period_ns
        self.events.add("step_applied", seq=plan.seq, step=due.index, skipped=due.skipped, slot_ns=slot_ns)
        if plan.applied == 0:
            plan.hops["action_applied"] = time.time_ns()
            self.latency.record(plan.hops)
        plan.applied += 1
