"""``FaultHandler``: how the Franka driver reacts to faults — reflexes, recoveries, a lost link,
operator resets.

Every fault path is a logged, counted transition of the ``FaultStateMachine`` and reads in one
place here, apart from the command path. It all runs in the arm's control-loop thread: ``call``
wraps each franky call the loop makes and hands a reflex or a lost link to its handler.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable

from rlinf_robot.errors import LinkLost, ReflexError
from rlinf_robot.robot.franka.config import FrankaConfig
from rlinf_robot.robot.franka.faults import ArmState, FaultStateMachine
from rlinf_robot.robot.franka.goals import GoalSlot
from rlinf_robot.robot.franka.link import ArmReading, FrankyLink
from rlinf_robot.robot.franka.servo import Servo
from rlinf_robot.safety import EStop, Watchdog

log = logging.getLogger(__name__)
_RECOVERY_BACKOFF_S = 0.2
#: A recovery still running after this long is logged as stuck (it blocks the control loop).
_RECOVERY_SLOW_S = 5.0


def _log_slow_recovery() -> None:
    log.error(
        "recover_from_errors has not returned after %.0f s; the control loop waits for it "
        "(no state, no commands until it does)",
        _RECOVERY_SLOW_S,
    )


class FaultHandler:
    def __init__(
        self,
        config: FrankaConfig,
        link: FrankyLink,
        machine: FaultStateMachine,
        slot: GoalSlot,
        servo: Servo,
        estop: EStop,
        watchdog: Watchdog,
        counters: Counter[str],
        publish: Callable[[ArmReading], None],
        rehome: Callable[[], None],
    ):
        self.config = config
        self.link = link
        self.machine = machine
        self.slot = slot
        self.servo = servo
        self.estop = estop
        self.watchdog = watchdog
        self.counters = counters
        self._publish = publish  # a reading after a reconnect goes out like any other
        self._rehome = rehome  # rehome_on_recover: the arm's own home goal
        self._last_recovery_try = -math.inf
        self._last_connect_try = -math.inf

    def call(self, fn: Callable[[], object]) -> Exception | None:
        """Run a call that drives the arm; a reflex or a lost link is handed to its handler (state
        machine, goal, counters) and returned, ``None`` when the call went through."""
        try:
            fn()
        except ReflexError as exc:
            self.on_reflex(exc)
            return exc
        except LinkLost as exc:
            self.on_link_lost(exc)
            return exc
        return None

    def on_reflex(self, exc: Exception) -> None:
        self.counters["reflexes"] += 1
        self.slot.clear("reflex")
        self.servo.forget()
        self.machine.fire("reflex", str(exc).splitlines()[0][:200])

    def on_link_lost(self, exc: Exception) -> None:
        self.counters["link_lost"] += 1
        self.slot.clear("link_lost")
        self.servo.forget()
        self.link.close()
        self._last_connect_try = time.monotonic()
        self.machine.fire("link_lost", str(exc).splitlines()[0][:200])

    def recover_if_due(self) -> None:
        """``auto_recover``: try again once the back-off since the last try has passed."""
        if time.monotonic() - self._last_recovery_try > _RECOVERY_BACKOFF_S:
            self.recover_now()

    def recover_now(self) -> bool:
        self._last_recovery_try = time.monotonic()
        # never while franky still runs a motion (``FrankyLink.out_of_control``): it is stopped
        # and the recovery waits for the next back-off, without counting as a failed one
        try:
            settled = self.link.out_of_control()
        except ReflexError:
            settled = False
        except LinkLost as exc:
            self.on_link_lost(exc)
            return False
        if not settled:
            self.counters["recoveries_deferred"] += 1
            return False
        self.machine.fire("recovering", "recover_from_errors")
        # franky's recovery runs on the control loop; if it ever blocks, say so while it waits, so
        # a stuck loop is visible in the node's log and not only as silence
        slow = threading.Timer(_RECOVERY_SLOW_S, _log_slow_recovery)
        slow.daemon = True
        slow.start()
        try:
            ok = self.link.recover() and not self.link.has_errors()
        except ReflexError as exc:
            ok, cause = False, str(exc)
        except LinkLost as exc:
            self.on_link_lost(exc)
            return False
        else:
            cause = "recover_from_errors succeeded" if ok else "recover_from_errors returned false"
        finally:
            slow.cancel()
        if not ok:
            self.counters["recoveries_failed"] += 1
            self.machine.fire("recovery_failed", cause)
            return False
        self.counters["recoveries"] += 1
        self.servo.forget()
        self.machine.fire("recovered", cause)
        if self.config.rehome_on_recover and self.machine.state is ArmState.ACTIVE:
            self._rehome()
        return True

    def try_reconnect(self) -> None:
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
        self.machine.fire("connected", f"reconnected to {self.config.robot_ip}")

    def reset(self) -> tuple[bool, str]:
        """Operator reset: clears the e-stop and a LATCHED fault, recovering the controller if needed."""
        self.estop.reset()
        self.slot.clear("reset")
        self.watchdog.reset()
        if self.link.connected:
            try:
                if self.link.has_errors() and not self.link.recover():
                    return False, "recover_from_errors failed; the arm is still faulted"
            except (ReflexError, LinkLost) as exc:
                return False, f"reset failed: {exc}"
        self.servo.forget()
        state = self.machine.fire("reset", "operator reset")
        return True, f"reset: arm is {state.value}"

    def recover(self) -> tuple[bool, str]:
        """Manual recovery from REFLEX (LATCHED and ESTOP need ``reset``)."""
        state = self.machine.state
        if state in (ArmState.LATCHED, ArmState.ESTOP):
            return False, f"the arm is {state.value}: only reset clears it"
        if state is ArmState.DISCONNECTED:
            return False, "no link to the arm; reconnecting"
        if state in (ArmState.REFLEX, ArmState.RECOVERING):
            ok = self.recover_now()
            return ok, f"arm is {self.machine.state.value}"
        if self.link.has_errors():
            ok = self.link.recover()
            return ok, "recovered" if ok else "recover_from_errors failed"
        return True, f"nothing to recover: arm is {state.value}"
