"""Deadman: the lease holder's process is killed mid-chunk -> the server holds within
deadman_ms + 20 ms, measured from the server's own event time stamps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

DEADMAN_MS = 100.0
SLACK_MS = 20.0

LEARNER = """
import sys, time, numpy as np
from rlinf_robot.bridge import BridgeClient
c = BridgeClient(endpoint=sys.argv[1]).connect()
c.acquire_lease()
print("ready", flush=True)
while True:  # a policy loop: a fresh 10 s chunk of tiny joint steps every 100 ms, until killed
    c.send_chunk(np.full((200, 7), 1e-4, np.float32), "joint_delta", 20.0, obs=c.observe(timeout=10))
    time.sleep(0.1)
"""


@pytest.mark.slow
def test_kill_9_of_the_lease_holder_holds_within_the_deadman_bound(make_server, arm):
    server = make_server(deadman_ms=DEADMAN_MS)
    proc = subprocess.Popen(
        [sys.executable, "-c", LEARNER, server.endpoint], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert len(server.events.wait("step_applied", 10, count=3)) >= 3  # mid-chunk
        t_kill = time.monotonic_ns()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    [deadman] = server.events.wait("deadman", 5, since_ns=t_kill)
    since_last_feed_ms = (deadman.t_ns - deadman.detail["last_feed_ns"]) / 1e6
    since_kill_ms = (deadman.t_ns - t_kill) / 1e6
    print(f"hold {since_last_feed_ms:.1f} ms after the last heartbeat, {since_kill_ms:.1f} ms after the kill")
    assert DEADMAN_MS <= since_last_feed_ms <= DEADMAN_MS + SLACK_MS, since_last_feed_ms
    assert since_kill_ms <= DEADMAN_MS + SLACK_MS, since_kill_ms
    holds = [e for e in server.events.find("hold", since_ns=t_kill) if e.detail["reason"] == "deadman"]
    assert holds and holds[0].detail["had_plan"] and holds[0].t_ns <= deadman.t_ns
    # the arm was told to hold, and nothing was applied after that
    hold_times = [t for t, _ in arm.entries("hold") if t >= t_kill]
    assert hold_times and hold_times[0] <= deadman.t_ns
    assert all(t < hold_times[0] for t, _ in arm.entries("apply"))
    assert server.status().state == "LINK_LOST"
