"""`rlinf_ros.side_services`: a service that waits runs beside the node's executor, under the name it
would have on the node, and never holds up the node's timers (real rclpy + Fast DDS on loopback)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from rlinf_robot.paths import REPO_ROOT

pytestmark = pytest.mark.integration

sys.path.insert(0, str(REPO_ROOT / "ros_ws" / "src" / "rlinf_ros"))


def test_a_blocking_side_service_answers_while_the_nodes_timer_keeps_its_rate():
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions
    from rlinf_ros.side_services import SideServices
    from std_srvs.srv import Trigger

    ctx = rclpy.Context()
    rclpy.init(context=ctx, signal_handler_options=SignalHandlerOptions.NO)
    executor = SingleThreadedExecutor(context=ctx)
    try:
        parent = Node("arm_node", namespace="/side_test", context=ctx)
        ticks: list[float] = []
        parent.create_timer(0.01, lambda: ticks.append(time.monotonic()))
        side = SideServices(parent, "slow")

        def wait_a_second(request, response):
            time.sleep(1.0)
            response.success, response.message = True, "waited"
            return response

        side.add(Trigger, "wait", wait_a_second)
        executor.add_node(parent)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()

        caller = Node("caller", context=ctx)
        executor.add_node(caller)
        client = caller.create_client(Trigger, "/side_test/wait")  # the name it would have on arm_node
        assert client.wait_for_service(timeout_sec=10.0)
        done = threading.Event()
        t0 = time.monotonic()
        future = client.call_async(Trigger.Request())
        future.add_done_callback(lambda _: done.set())
        assert done.wait(10.0), "the side service never answered"
        t1 = time.monotonic()
        assert future.result().message == "waited" and t1 - t0 >= 1.0
        during = [t for t in ticks if t0 < t < t1]
        assert len(during) >= 50, f"the node's 100 Hz timer fired {len(during)} times in {t1 - t0:.2f} s"
        assert side.node.get_fully_qualified_name() == "/side_test/arm_node_slow"

        closed = time.monotonic()
        side.close()
        assert time.monotonic() - closed < 3.0
    finally:
        executor.shutdown(timeout_sec=2.0)
        rclpy.try_shutdown(context=ctx)
