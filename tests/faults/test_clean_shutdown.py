"""Issue 19, item 5: Ctrl-C (SIGINT) or SIGTERM of `rlinf-robot robot up --sim` while a client
drives the arm through the bridge: every process (franka-sim, franka_node, camera_node, bridge_node,
the supervisor) stops on the signal without a traceback, franka_node holds the arm before it lets
go, and everything exits 0.

Before the fix franka_node printed an ``RCLError`` traceback: rclpy's signal handler shut the ROS
context down first, and the arm's control loop published ``joint_states`` into it before the node
was released.
"""

from __future__ import annotations

import signal
import time

import numpy as np
import pytest

from tests.bridge.wire import WireClient
from tests.integration.robot.conftest import RobotUp, alive, derived_config, descendants
from tests.integration.robot.probe import wait_until
from tests.support.hybrid_run import free_port

# franka-sim is one per machine: the stack may wait for another session's (up to 600 s)
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]
NODES = ("franka_sim", "franka_node", "camera_node", "bridge_node")


def _drive(endpoint: str) -> WireClient:
    """A lease holder streaming a slow joint-delta chunk (3 s), returned once the arm moves."""
    c = WireClient(endpoint, "pilot", heartbeat_s=0.02)
    deadline = time.monotonic() + 60
    while (answer := c.command("acquire_lease", timeout=30))["type"] != "status":
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)
    assert c.command("subscribe")["type"] == "status"
    obs = c.latest(timeout=60)
    rows = np.zeros((60, 7), np.float32)
    rows[:, 0] = 0.003 * (1 if obs["joint_pos"][0] < 0 else -1)  # 0.06 rad/s, away from the limit
    seq = c.chunk(rows, "joint_delta", 20.0, obs["seq"])
    c.wait(
        lambda m: (
            m["type"] == "observation"
            and m.get("chunk_seq") == seq
            and m.get("chunk_report", {}).get("applied", 0) >= 10
        ),
        30,
        "the arm moving",
    )
    return c


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_robot_up_stops_cleanly_while_the_arm_moves(sig, tmp_path):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = derived_config(
        tmp_path,
        "stack.yaml",
        set(NODES),
        {
            "bridge_node": {"endpoint": endpoint, "deadman_ms": 300.0},  # no accidental deadman on busy CPUs
        },
    )
    up = RobotUp("--sim", "--config", str(config), "--ready-timeout", "600")
    client = None
    try:
        pids = up.ready(660)
        assert set(pids) == set(NODES), pids
        family = descendants(up.proc.pid)
        client = _drive(endpoint)
        t0 = time.monotonic()
        code = up.stop(sig, timeout_s=120)
        stop_s = time.monotonic() - t0
    finally:
        if client is not None:
            client.close()
        up.stop(signal.SIGKILL, timeout_s=10)
    text = up.text()
    tail = text[-6000:]
    assert code == 0, tail
    assert "Traceback" not in text and "RCLError" not in text, tail
    assert "robot up: stopped" in text, tail  # every child stopped on its first signal with exit 0
    assert "[franka_node]" in text and "hold: node shutting down" in text, tail  # the arm held first
    assert stop_s < 60, f"stopping took {stop_s:.1f} s"
    assert wait_until(lambda: not any(alive(p) for p in family), 20), "orphaned processes"
