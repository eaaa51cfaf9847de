"""Drive lifecycle nodes to ACTIVE over their ``change_state`` / ``get_state`` services.

What launch_ros's ``ChangeState`` events do in the launch files, done from ``robot up``: wait for
the node's services, then configure (unconfigured -> inactive) and activate (inactive -> active).
rclpy runs in its own context without signal handlers, so ``robot up`` keeps SIGINT/SIGTERM.
"""

from __future__ import annotations

import threading
import time
from typing import Any

_PRIMARY = {1: "unconfigured", 2: "inactive", 3: "active", 4: "finalized"}
_STEP_S = 3.0  # wait this long for one answer before asking get_state again
_ATTEMPTS = 3  # transition requests per state before giving up


class LifecycleManager:
    def __init__(self, node_name: str = "rlinf_robot_up"):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self._rclpy = rclpy
        self._context = rclpy.Context()
        rclpy.init(context=self._context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node(node_name, context=self._context)
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="robot-up-ros", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self._executor.spin()
        except Exception:  # context shut down while spinning
            pass

    def bring_up(self, fqn: str, timeout_s: float, should_stop=lambda: False) -> tuple[bool, str]:
        """Configure and activate ``fqn`` (e.g. ``/franka/franka_node``); returns (ok, why).

        State-driven and retried: after a node restart the graph still lists the dead instance's
        services for a while, so a request can go to nobody. Each step therefore asks ``get_state``
        again and re-sends a transition only when the node is still where it was.
        """
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState, GetState

        steps = {"unconfigured": Transition.TRANSITION_CONFIGURE, "inactive": Transition.TRANSITION_ACTIVATE}
        verbs = {"unconfigured": "configure", "inactive": "activate"}
        deadline = time.monotonic() + timeout_s
        get: Any = self.node.create_client(GetState, f"{fqn}/get_state")
        change: Any = self.node.create_client(ChangeState, f"{fqn}/change_state")
        attempts: dict[str, int] = {}
        try:
            while time.monotonic() < deadline and not should_stop():
                if not get.wait_for_service(timeout_sec=0.5):
                    continue
                state = self._call(get, GetState.Request(), _STEP_S)
                if state is None:
                    continue  # lost request, or the node is busy in a transition
                label = _PRIMARY.get(state.current_state.id)
                if label == "active":
                    return True, "active"
                if label is None:  # configuring, activating, ...: wait for it to settle
                    time.sleep(0.1)
                    continue
                if label not in steps:
                    return False, f"{fqn} is {label}"
                attempts[label] = attempts.get(label, 0) + 1
                if attempts[label] > _ATTEMPTS:
                    return False, f"{fqn} did not {verbs[label]} after {_ATTEMPTS} attempts"
                request = ChangeState.Request()
                request.transition.id = steps[label]
                result = self._call(change, request, _STEP_S)
                if result is not None and not result.success:
                    return False, f"{fqn} failed to {verbs[label]} (see its output above)"
            return False, f"{fqn} not active within {timeout_s:g} s"
        finally:
            self.node.destroy_client(get)
            self.node.destroy_client(change)

    def _call(self, client, request, timeout_s: float):
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        if not done.wait(timeout_s):
            future.cancel()
            return None
        return future.result()

    def close(self) -> None:
        self._executor.shutdown()
        self._thread.join(timeout=5.0)
        self.node.destroy_node()
        self._context.try_shutdown()
