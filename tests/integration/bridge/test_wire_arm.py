"""docs/protocol.md through the wire on the arm's path: the independent client (tests/bridge/wire.py:
pyzmq + msgpack) against `rlinf-robot robot up --sim` (franka-sim with its FCI motion limits
enforced, franka_node, bridge_node; no camera_node, so the configured camera is stale). What the
in-memory arm cannot show: reset / recover / home answered only once franka_node takes commands
again, real reflexes, busy while the arm homes, a sensor that never sends."""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest

from rlinf_robot.robot.franka.model import HOME_Q
from tests.bridge.wire import WireClient
from tests.integration.robot.conftest import RobotUp, derived_config
from tests.integration.robot.probe import RosProbe, wait_until
from tests.support.hybrid_run import free_port

# franka-sim is one per machine: the stack may wait for another session's (up to 600 s), inside the first test
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]
FAST, SLOW = 1.0, 0.2  # relative_dynamics_factor: 1.0 plans beyond franka-sim's enforced limits


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = derived_config(
        tmp_path_factory.mktemp("wire"),
        "wire.yaml",
        {"franka_sim", "franka_node", "bridge_node"},
        {
            "franka_sim": {"enforce_motion_limits": True, "gripper": False},
            # auto_recover off: a reflex stays until the client sends `recover`
            "franka_node": {
                "control_rate_hz": 50.0,
                "gripper": False,
                "auto_recover": False,
                "max_faults": 20,
                "fault_window_s": 120.0,
            },
            # a deadman a busy test machine does not trip by accident; the camera has no node behind it
            "bridge_node": {"endpoint": endpoint, "deadman_ms": 300.0, "camera_topics": ["front/image_raw"]},
        },
    )
    up = RobotUp("--sim", "--config", str(config), "--ready-timeout", "600")  # franka-sim: one per machine
    probe = None
    try:
        up.ready(660)
        probe = RosProbe()
        assert wait_until(lambda: probe.state() == "ACTIVE", 30), up.text()[-3000:]
        yield endpoint, probe, up
    finally:
        if probe is not None:
            probe.close()
        up.stop()


@contextlib.contextmanager
def pilot(stack):
    """A wire client holding the lease, subscribed, heartbeating; the lease released at the end.
    On failure, the robot PC's last output lines are shown."""
    endpoint, probe, up = stack
    c = WireClient(endpoint, "pilot", heartbeat_s=0.02)
    try:
        deadline = time.monotonic() + 10
        while (answer := c.command("acquire_lease", timeout=30))["type"] != "status":
            assert time.monotonic() < deadline, answer  # a previous holder's lease has yet to lapse
            time.sleep(0.2)
        assert c.command("subscribe")["type"] == "status"
        c.observation(timeout=30)
        yield c
    except BaseException:
        print("---- robot up output (last lines) ----\n" + "\n".join(up.text().splitlines()[-60:]))
        raise
    finally:
        with contextlib.suppress(Exception):
            c.command("release_lease", timeout=5)
        c.close()


def done(seq):
    return lambda o: o.get("chunk_seq", -1) >= seq and not o.get("chunk_active", False)


def run_chunk(c: WireClient, rows, mode="joint_delta", hz=20.0, timeout=20.0) -> dict:
    """Send a chunk on the newest observation; returns the observation after it ended. Fails
    on any error answering it (with the error)."""
    obs = c.latest()
    seq = c.chunk(np.asarray(rows, np.float32), mode, hz, obs["seq"])
    end = c.wait(
        lambda m: (
            (m["type"] == "observation" and done(seq)(m)) or (m["type"] == "error" and m["ref_seq"] == seq)
        ),
        timeout,
        f"the end of chunk {seq}",
    )
    assert end["type"] == "observation", end
    assert end["chunk_report"]["applied"] == len(rows), end["chunk_report"]
    return end


def test_reset_answers_when_the_arm_takes_chunks_again(stack):
    """Issue 14.1 on the arm: the reply came ~0.05 s after `reset` with `state: ESTOP` while
    franka_node's state reached the bridge 0.2-0.45 s later, and a chunk sent on the reply was
    refused in 2 of 4 runs."""
    endpoint, probe, up = stack
    with pilot(stack) as c:
        for i in range(4):
            assert c.command("stop")["state"] == "ESTOP"
            assert wait_until(lambda: probe.state() == "ESTOP", 10), probe.diag
            time.sleep(0.3)  # the bridge has seen the arm's ESTOP too (its 5 Hz diagnostics)
            reply = c.command("reset", timeout=30)
            assert reply["type"] == "status" and reply["state"] == "HOLD", reply
            run_chunk(c, np.full((2, 7), 0.002 * (-1) ** i, np.float32))  # sent right on the reply


def test_home_answers_once_there_and_chunks_meanwhile_are_busy(stack):
    endpoint, probe, up = stack
    with pilot(stack) as c:
        away = np.zeros((15, 7), np.float32)
        away[:, 0] = 0.01
        run_chunk(c, away, hz=10.0)
        home = c.send({"type": "command", "name": "home"})
        obs = c.latest()
        seq = c.chunk(np.zeros((1, 7), np.float32), "joint_delta", 20.0, obs["seq"])
        refusal = c.wait(lambda m: m.get("ref_seq") == seq, 10, "the refusal while homing")
        assert refusal["code"] == "busy", refusal
        reply = c.wait(lambda m: m.get("ref_seq") == home, 60, "the home reply")
        if reply.get("state") != "HOLD":  # a load-induced reflex cut the homing short
            reply = home_after_a_reflex(c, probe, first=reply)
        assert reply["type"] == "status" and reply["state"] == "HOLD", reply
        at = c.latest()
        assert np.max(np.abs(at["joint_pos"] - HOME_Q)) < 0.01, at["joint_pos"] - HOME_Q
        run_chunk(c, np.full((2, 7), 0.002, np.float32))


def test_a_reflex_refuses_chunks_with_fault_until_recover(stack):
    """A real reflex (franka-sim enforcing the FCI's limits, franka_node at relative_dynamics_factor
    1.0): the state says REFLEX, chunks get `fault`, `recover` answers once the arm takes chunks."""
    endpoint, probe, up = stack
    with pilot(stack) as c:
        assert probe.set_param("franka_node", "relative_dynamics_factor", FAST).successful
        try:
            deadline, sign, state = time.monotonic() + 60, 1.0, ""
            while state != "REFLEX" and time.monotonic() < deadline:
                obs = c.latest()
                ramp = obs["joint_pos"] + np.outer(np.arange(1, 11) * 0.05 * sign, np.eye(7)[0])
                seq = c.chunk(ramp.astype(np.float32), "joint_position", 10.0, obs["seq"])
                c.maybe(lambda m, s=seq: done(s)(m) or (m["type"] == "error" and m["ref_seq"] == s), 3)
                state = c.command("status")["state"]
                sign = -sign
        finally:
            assert probe.set_param("franka_node", "relative_dynamics_factor", SLOW).successful
        assert state == "REFLEX", f"no reflex within 60 s: {probe.diag}"
        obs = c.latest()
        seq = c.chunk(np.zeros((1, 7), np.float32), "joint_delta", 20.0, obs["seq"])
        err = c.wait(lambda m: m["type"] == "error" and m["ref_seq"] == seq, 10, "the refusal")
        assert err["code"] == "fault", err
        reply = c.command("recover", timeout=30)
        assert reply["type"] == "status" and reply["state"] == "HOLD", reply
        run_chunk(c, np.full((2, 7), 0.002, np.float32))  # right on the reply
        home_after_a_reflex(c, probe)


def home_after_a_reflex(c: WireClient, probe, tries: int = 5, first: dict | None = None) -> dict:
    """Home, recovering a reflex that homing ran into. On a loaded host (1 CPU with load beside it,
    or a clean clone beside a training job) franky's switch from the last chunk's motion to the
    homing motion can read as a velocity discontinuity: a real reflex (measured once in a capped
    run: REFLEX 0.13 s into homing). This stack runs ``auto_recover: False``, so the reflex stays
    until `recover`: each reply that names REFLEX is printed, recovered and homing sent again.
    ``first``: a home reply the caller already has. Returns the reply that said HOLD."""
    replies = []
    for _ in range(tries):
        reply = first if first is not None else c.command("home", timeout=60)
        first = None
        replies.append(reply)
        if reply.get("state") == "HOLD":
            return reply
        assert reply.get("type") == "error", replies  # homing cut by the reflex, or refused during it
        if "REFLEX" in reply.get("message", "") or c.command("status").get("state") == "REFLEX":
            print(f"homing ended in a reflex, recovering and homing again: {reply}; {probe.diag}")
            assert c.command("recover", timeout=30).get("state") == "HOLD", replies
        else:
            time.sleep(2.0)
    raise AssertionError(f"home did not answer HOLD in {tries} tries: {replies}; {probe.diag}")


def test_a_sensor_that_never_sent_is_named_stale(stack):
    with pilot(stack) as c:
        obs = c.latest()
        assert obs["stale"] == ["front"] and obs["images"] == {}, (obs["stale"], list(obs["images"]))
        assert obs["joint_pos"].shape == (7,)
