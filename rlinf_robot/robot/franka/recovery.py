"""How the Franka driver reacts to faults: reflexes, recoveries, a lost link, operator resets.

A mixin of ``FrankaArm`` (it uses the arm's link, state machine, goal and counters): kept apart so
the driver's command path reads on its own, and every fault path — each one a logged, counted
state transition — reads in one place. All of it runs in the arm's control-loop thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from rlinf_robot.errors import LinkLost, ReflexError
from rlinf_robot.robot.franka.faults import ArmState
from rlinf_robot.safety import ArmAction

log = logging.getLogger(__name__)


class FaultHandling:
    def _franky_call(self, call: Callable[[], object]) -> Exception | None:
        """Run a call that drives the arm; a reflex or a lost link is handed to its handler (state
        machine, goal, counters) and returned, ``None`` when the call went through."""
        try:
            call()
        except ReflexError as exc:
            self._on_reflex(exc)
            return exc
        except LinkLost as exc:
            self._on_link_lost(exc)
            return exc
        return None

    def _on_reflex(self, exc: Exception) -> None:
        self.counters["reflexes"] += 1
        self._clear_goal("reflex")
        self._last_sent = None
        self.faults.fire("reflex", str(exc).splitlines()[0][:200])

    def _recover_now(self) -> bool:
        self._last_recovery_try = time.monotonic()
        self.faults.fire("recovering", "recover_from_errors")
        try:
            ok = self.link.recover() and not self.link.has_errors()
        except ReflexError as exc:
            ok, cause = False, str(exc)
        except LinkLost as exc:
            self._on_link_lost(exc)
            return False
        else:
            cause = "recover_from_errors succeeded" if ok else "recover_from_errors returned false"
        if not ok:
            self.counters["recoveries_failed"] += 1
            self.faults.fire("recovery_failed", cause)
            return False
        self.counters["recoveries"] += 1
        self._last_sent = None
        self.faults.fire("recovered", cause)
        if self.config.rehome_on_recover and self.faults.state is ArmState.ACTIVE:
            self._home_done.clear()
            self.submit(ArmAction("joint_position", self._home_q), source="home")
        return True

    def _on_link_lost(self, exc: Exception) -> None:
        self.counters["link_lost"] += 1
        self._clear_goal("link_lost")
        self._last_sent = None
        self._last_read_t = None
        self.link.close()
        self._last_connect_try = time.monotonic()
        self.faults.fire("link_lost", str(exc).splitlines()[0][:200])

    def _try_reconnect(self) -> None:
        now = time.monotonic()
        if now - self._last_connect_try < self.config.reconnect_period_s:
            return
        self._last_connect_try = now
        try:
            self.link.connect()
            if self.link.has_errors():
                self.link.recover()
            reading = self.link.read()
        except (LinkLost, ReflexError) as exc:
            log.debug("reconnect failed: %s", exc)
            self.link.close()
            return
        self.counters["reconnects"] += 1
        self._publish(reading)
        self.faults.fire("connected", f"reconnected to {self.config.robot_ip}")

    def _do_reset(self) -> tuple[bool, str]:
        self.estop.reset()
        self._clear_goal("reset")
        self.watchdog.reset()
        if self.link.connected:
            try:
                if self.link.has_errors() and not self.link.recover():
                    return False, "recover_from_errors failed; the arm is still faulted"
            except (ReflexError, LinkLost) as exc:
                return False, f"reset failed: {exc}"
        self._last_sent = None
        state = self.faults.fire("reset", "operator reset")
        return True, f"reset: arm is {state.value}"

    def _do_recover(self) -> tuple[bool, str]:
        state = self.faults.state
        if state in (ArmState.LATCHED, ArmState.ESTOP):
            return False, f"the arm is {state.value}: only reset clears it"
        if state is ArmState.DISCONNECTED:
            return False, "no link to the arm; reconnecting"
        if state in (ArmState.REFLEX, ArmState.RECOVERING):
            ok = self._recover_now()
            return ok, f"arm is {self.faults.state.value}"
        if self.link.has_errors():
            ok = self.link.recover()
            return ok, "recovered" if ok else "recover_from_errors failed"
        return True, f"nothing to recover: arm is {state.value}"
