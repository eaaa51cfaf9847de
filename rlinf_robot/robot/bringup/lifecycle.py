"""Drive lifecycle nodes to ACTIVE over their ``change_state`` / ``get_state`` services.

What launch_ros's ``ChangeState`` events do in the launch files, done from ``robot up``: wait for
the node's services, then configure (unconfigured -> inactive) and activate (inactive -> active).
rclpy runs in its own context without signal handlers, so ``robot up`` keeps SIGINT/SIGTERM.
"""

from __future__ import annotations

import threading
import time

_PRIMARY = {1: "unconfigured", 2: "inactive", 3: "active", 4: "finalized"}


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

    def bring_up(self, fqn: str, timeout_s: float) -> tuple[bool, str]:
        """Configure and activate ``fqn`` (e.g. ``/franka/franka_node``); returns (ok, why)."""
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState, GetState

        deadline = time.monotonic() + timeout_s
        get = self.node.create_client(GetState, f"{fqn}/get_state")
        change = self.node.create_client(ChangeState, f"{fqn}/change_state")
        try:
            for client in (get, change):
                if not client.wait_for_service(timeout_sec=max(deadline - time.monotonic(), 0.1)):
                    return False, f"{fqn}: lifecycle services did not appear within {timeout_s:g} s"
            steps = {"unconfigured": Transition.TRANSITION_CONFIGURE, "inactive": Transition.TRANSITION_ACTIVATE}
            while True:
                state = self._call(get, GetState.Request(), deadline)
                if state is None:
                    return False, f"{fqn}: get_state did not answer"
                label = _PRIMARY.get(state.current_state.id, state.current_state.label)
                if label == "active":
                    return True, "active"
                if label not in steps:
                    return False, f"{fqn} is {label}"
                request = ChangeState.Request()
                request.transition.id = steps[label]
                result = self._call(change, request, deadline)
                if result is None or not result.success:
                    verb = "configure" if label == "unconfigured" else "activate"
                    return False, f"{fqn} failed to {verb} (see its output above)"
        finally:
            self.node.destroy_client(get)
            self.node.destroy_client(change)

    def _call(self, client, request, deadline: float):
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        if not done.wait(max(deadline - time.monotonic(), 0.1)):
            future.cancel()
            return None
        return future.result()

    def close(self) -> None:
        self._executor.shutdown()
        self._thread.join(timeout=5.0)
        self.node.destroy_node()
        self._context.try_shutdown()
