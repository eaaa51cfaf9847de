"""StreamBackend (the ROS-free core of bridge_node): latest-sample sync with max ages, stale sensors
never reused, commands out through sinks; also end to end through a real BridgeServer."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rlinf_robot.bridge.stream_backend import CommandSinks, StreamBackend
from rlinf_robot.robot.franka.model import HOME_Q, tcp_pose
from rlinf_robot.safety import SafeAction


class Sinks:
    """Records what would be published / called."""

    def __init__(self, ok: bool = True):
        self.joint, self.ee, self.calls, self.stops, self.holds, self.ok = [], [], [], 0, 0, ok

    def make(self) -> CommandSinks:
        def stop():
            self.stops += 1

        def hold():
            self.holds += 1

        return CommandSinks(
            lambda q, g: self.joint.append((np.array(q), g)),
            lambda p: self.ee.append(np.array(p)),
            lambda name: self.calls.append(name) or (self.ok, f"{name}: ok" if self.ok else "refused"),
            stop,
            hold,
        )


def until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.005)
    return False


def feed_arm(b: StreamBackend, q=HOME_Q):
    b.on_arm(q, np.zeros(7), tcp_pose(q), 0.04, time.time_ns())


def test_no_state_before_the_first_sample_and_after_its_max_age():
    b = StreamBackend(Sinks().make(), state_max_age_s=0.05)
    assert b.state() is None and b.observe() is None
    feed_arm(b)
    assert np.allclose(b.state().joint_pos, HOME_Q)
    assert until(lambda: b.state() is None)  # went stale: nothing may be applied now
    assert b.observe().stale == ["joint_states"]


def test_a_camera_that_stops_is_marked_stale_and_left_out():
    b = StreamBackend(Sinks().make(), cameras=["front", "wrist"], camera_max_age_s=0.05, state_max_age_s=10)
    feed_arm(b)
    img = np.full((4, 5, 3), 7, np.uint8)
    b.on_image("front", img, time.time_ns())
    obs = b.observe()
    assert set(obs.images) == {"front"} and obs.stale == ["wrist"]
    np.testing.assert_array_equal(obs.images["front"], img)
    assert until(lambda: "front" in b.observe().stale)
    assert b.observe().images == {}


def test_targets_go_to_the_sinks_and_are_republished_only_while_current():
    sinks = Sinks()
    b = StreamBackend(sinks.make(), target_hold_s=0.1)
    feed_arm(b)
    q = HOME_Q + 0.01
    b.apply(SafeAction("joint_position", q, 0.03, "joint_delta"))
    b.keepalive()
    assert len(sinks.joint) == 2 and np.allclose(sinks.joint[1][0], q) and sinks.joint[1][1] == 0.03
    pose = tcp_pose(q)
    b.apply(SafeAction("ee_target", pose, None, "ee_delta"))
    assert np.allclose(sinks.ee[-1], pose)

    def republishes() -> bool:
        n = len(sinks.ee)
        b.keepalive()
        return len(sinks.ee) > n

    assert republishes()
    assert until(lambda: not republishes())  # older than target_hold_s: no longer republished


def test_hold_asks_the_driver_to_brake_and_stops_republishing():
    """No joint target of its own: "the current joints" would make a moving arm drive back."""
    sinks = Sinks()
    b = StreamBackend(sinks.make(), target_hold_s=10)
    feed_arm(b, HOME_Q + 0.2)
    b.apply(SafeAction("joint_position", HOME_Q, None, "joint_position"))
    n = len(sinks.joint)
    b.hold()
    assert sinks.holds == 1 and len(sinks.joint) == n
    b.keepalive()
    assert len(sinks.joint) == n
    b.stop()
    assert sinks.stops == 1


def test_commands_call_services_and_failures_raise():
    ok, bad = Sinks(), Sinks(ok=False)
    assert StreamBackend(ok.make()).run_command("home", {}) == "home: ok" and ok.calls == ["home"]
    with pytest.raises(RuntimeError, match="refused"):
        StreamBackend(bad.make()).run_command("recover", {})


def test_stale_camera_over_the_bridge(make_server, make_client):
    sinks = Sinks()
    b = StreamBackend(sinks.make(), cameras=["front"], camera_max_age_s=0.1, state_max_age_s=10)
    feed_arm(b)
    b.on_image("front", np.zeros((8, 8, 3), np.uint8), time.time_ns())
    server = make_server(b)
    client = make_client(server)
    assert "front" in client.observe(timeout=5).images
    stale = client.observe(timeout=5, predicate=lambda o: bool(o.stale))
    assert stale.stale == ["front"] and "front" not in stale.images
    # the arm moves through the sinks only via the safety filter, with a fresh state
    client.acquire_lease()
    obs = client.observe(timeout=5)
    seq = client.send_chunk(np.full((1, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
    client.observe(timeout=5, predicate=lambda o: o.chunk_seq >= seq and not o.chunk_active)
    assert np.allclose(sinks.joint[0][0], HOME_Q + 0.01)
