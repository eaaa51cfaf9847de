"""BridgeServer + BridgeClient on loopback (real ZeroMQ sockets, in-memory arm)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rlinf_robot.bridge import BridgeTimeout, CommandRefused
from rlinf_robot.errors import Latched
from rlinf_robot.robot.franka.model import HOME_Q

MS = 1_000_000


def done_with(seq):
    """Predicate: an observation captured after chunk ``seq`` finished."""
    return lambda o: o.chunk_seq >= seq and not o.chunk_active


def test_round_trip_observation_and_status(server, client, arm):
    obs = client.observe(timeout=5)
    assert obs.seq >= 1 and obs.instruction == "reach"
    np.testing.assert_array_equal(obs.images["front"], arm.images["front"])
    np.testing.assert_allclose(obs.joint_pos, HOME_Q)
    assert {"obs_captured", "obs_sent", "obs_received"} <= set(obs.hops)
    assert obs.hops["obs_captured"] <= obs.hops["obs_sent"] <= obs.hops["obs_received"]
    newer = client.observe(timeout=5)
    assert newer.seq > obs.seq
    st = client.status()
    assert st.state == "IDLE" and st.lease_holder == "" and st.counters["obs_published"] >= 2
    assert "capture_to_send" in st.latency_ms and st.latency_ms["capture_to_send"]["p50"] >= 0


def test_chunk_runs_each_step_in_its_slot_at_the_declared_rate(server, client, arm):
    client.acquire_lease()
    obs = client.observe(timeout=5)
    t_send = time.monotonic_ns()
    seq = client.send_chunk(np.full((5, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
    end = client.observe(timeout=5, predicate=done_with(seq))
    np.testing.assert_allclose(end.joint_pos, HOME_Q + 0.05, atol=1e-9)
    steps = server.events.find("step_applied", since_ns=t_send)
    assert [e.detail["step"] for e in steps] == [0, 1, 2, 3, 4]
    t = np.array([e.t_ns for e in steps])
    slots = np.array([e.detail["slot_ns"] for e in steps])
    # step k owns the slot [t0 + k*100, t0 + (k+1)*100) ms from the chunk's arrival t0, and never
    # runs before it (lateness is not bounded here: the CPUs are shared)
    np.testing.assert_array_equal(slots - slots[0], np.arange(5) * 100 * MS)
    assert np.all(t >= slots) and slots[0] >= t_send
    st = client.status()
    assert st.counters["steps_applied"] == 5 and st.state == "HOLD"
    assert {"obs_to_action", "apply_delay", "end_to_end", "inference"} <= set(st.latency_ms)


def test_new_chunk_replaces_the_rest_from_its_aligned_step(server, client, arm):
    client.acquire_lease()
    o1 = client.observe(timeout=5)
    s1 = client.send_chunk(np.full((20, 7), 0.001, np.float32), "joint_delta", 10.0, obs=o1, align=True)
    server.events.wait("step_applied", 5, count=3, since_ns=o1.stamp_ns)
    o2 = client.observe(timeout=5)
    s2 = client.send_chunk(np.full((20, 7), -0.001, np.float32), "joint_delta", 10.0, obs=o2, align=True)
    server.events.wait("step_applied", 5, count=2, since_ns=o2.stamp_ns)
    accepted = server.events.find("chunk_accepted")
    assert [e.detail["seq"] for e in accepted] == [s1, s2]
    applied = [(e.detail["seq"], e.detail["step"], e.t_ns) for e in server.events.find("step_applied")]
    first_of_2 = next(a for a in applied if a[0] == s2)
    # the replacement starts at the slot that contains its arrival, counted from o2's capture time
    arrival = next(e.t_ns for e in accepted if e.detail["seq"] == s2)
    assert first_of_2[1] == (arrival - o2.stamp_ns) // (100 * MS)
    assert all(seq == s2 for seq, _, t in applied if t > first_of_2[2])  # nothing of chunk 1 after


def test_chunk_from_a_stale_observation_is_dropped_and_counted(make_server, make_client, arm):
    server = make_server(max_obs_age_ms=150.0)
    client = make_client(server)
    client.acquire_lease()
    old = client.observe(timeout=5)
    client.observe(timeout=5, predicate=lambda o: o.stamp_ns - old.stamp_ns > 200 * MS)
    seq = client.send_chunk(np.zeros((3, 7), np.float32), "joint_delta", 10.0, obs=old)
    server.events.wait("chunk_dropped", 5)
    client.status()
    [err] = client.take_errors(ref_seq=seq)
    assert err.code == "stale_obs"
    assert client.status().counters["chunks_dropped_stale_obs"] == 1
    assert arm.entries("apply") == []


def test_explicit_first_action_time_already_past_is_dropped(server, client, arm):
    client.acquire_lease()
    obs = client.observe(timeout=5)
    seq = client.send_chunk(
        np.zeros((3, 7), np.float32),
        "joint_delta",
        10.0,
        obs=obs,
        first_action_time_ns=obs.stamp_ns - 500 * MS,
    )
    server.events.wait("chunk_dropped", 5)
    client.status()
    [err] = client.take_errors(ref_seq=seq)
    assert err.code == "late" and arm.entries("apply") == []


def test_non_finite_and_out_of_limit_chunks_move_nothing(server, client, arm):
    client.acquire_lease()
    obs = client.observe(timeout=5)
    bad = np.zeros((3, 7), np.float32)
    bad[1, 2] = np.nan
    s_nan = client.send_chunk(bad, "joint_delta", 10.0, obs=obs)
    far = np.tile(HOME_Q, (2, 1)).astype(np.float32)
    far[:, 0] = 3.5  # beyond joint 1's limit: an absolute target is rejected, not clamped
    s_far = client.send_chunk(far, "joint_position", 10.0, obs=obs)
    server.events.wait("step_rejected", 5)
    client.status()
    codes = {e.ref_seq: e.code for e in client.take_errors()}
    assert codes == {s_nan: "unsafe", s_far: "unsafe"}
    assert arm.entries("apply") == []
    st = client.status()
    assert st.counters["chunks_rejected_non_finite"] == 1 and st.counters["safety_rejected_joint_limit"] == 1


def test_observer_without_the_lease_cannot_move_the_arm(server, make_client, arm):
    holder, observer = make_client(server), make_client(server)
    holder.acquire_lease()
    obs = observer.observe(timeout=5)
    seq = observer.send_chunk(np.full((2, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
    observer.status()
    [err] = observer.take_errors(ref_seq=seq)
    assert err.code == "refused" and arm.entries("apply") == []
    with pytest.raises(CommandRefused, match="held by"):
        observer.acquire_lease()
    with pytest.raises(CommandRefused):
        observer.command("home")


def test_lease_handover_on_release(server, make_client, arm):
    a, b = make_client(server), make_client(server)
    a.acquire_lease()
    a.release_lease()
    st = b.acquire_lease()
    assert st.lease_holder == b.client_id
    obs = b.observe(timeout=5)
    seq = b.send_chunk(np.full((1, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
    b.observe(timeout=5, predicate=done_with(seq))
    assert len(arm.entries("apply")) == 1
    a_obs = a.observe(timeout=5)
    a_seq = a.send_chunk(np.full((1, 7), 0.01, np.float32), "joint_delta", 10.0, obs=a_obs)
    a.status()
    assert [e.code for e in a.take_errors(ref_seq=a_seq)] == ["refused"]


def test_lease_lapses_when_the_holder_goes_quiet(make_server, make_client):
    server = make_server(deadman_ms=50.0, lease_timeout_ms=200.0)
    a, b = make_client(server), make_client(server)
    a.acquire_lease()
    t_close = time.monotonic_ns()
    a.close(release_lease=False)  # goes quiet, as a crashed learner would
    [dead] = server.events.wait("deadman", 5, since_ns=t_close)
    [lapse] = server.events.wait("lease_expired", 5, since_ns=t_close)
    assert lapse.detail["client"] == a.client_id and lapse.t_ns > dead.t_ns
    assert b.acquire_lease().lease_holder == b.client_id


def test_deadman_broadcasts_link_lost_to_observers(make_server, make_client):
    server = make_server(deadman_ms=80.0)
    holder, observer = make_client(server), make_client(server)
    holder.acquire_lease()
    observer.subscribe()
    holder.close(release_lease=False)
    server.events.wait("deadman", 5)
    observer.observe(timeout=5, predicate=lambda o: observer.last_status is not None)
    assert observer.last_status.state == "LINK_LOST"
    assert observer.status().state == "LINK_LOST"


def test_stop_latches_until_reset(server, make_client, arm):
    holder, bystander = make_client(server), make_client(server)
    holder.acquire_lease()
    assert bystander.command("stop").state == "ESTOP"  # anyone may stop the arm
    obs = holder.observe(timeout=5)
    seq = holder.send_chunk(np.full((2, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
    with pytest.raises(Latched):
        holder.command("home")
    holder.status()
    assert [e.code for e in holder.take_errors(ref_seq=seq)] == ["latched"]
    assert arm.entries("apply") == [] and len(arm.entries("stop")) == 1
    assert holder.command("reset").state == "HOLD"
    obs = holder.observe(timeout=5)
    seq = holder.send_chunk(np.full((1, 7), 0.01, np.float32), "joint_delta", 10.0, obs=obs)
    holder.observe(timeout=5, predicate=done_with(seq))
    assert len(arm.entries("apply")) == 1


def test_home_runs_on_the_worker_and_answers_when_done(server, client, arm):
    client.acquire_lease()
    obs = client.observe(timeout=5)
    seq = client.send_chunk(np.full((2, 7), 0.02, np.float32), "joint_delta", 50.0, obs=obs)
    client.observe(timeout=5, predicate=done_with(seq))
    assert client.command("home").message == "home done"
    np.testing.assert_allclose(client.observe(timeout=5).joint_pos, HOME_Q)


def test_observe_times_out_with_a_typed_error(make_server, make_client):
    server = make_server(obs_rate_hz=2.0)
    client = make_client(server)
    client.observe(timeout=5)
    with pytest.raises(BridgeTimeout):  # the next one is 0.5 s away
        client.observe(timeout=0.2)


def test_a_learner_that_fell_behind_gets_the_newest_observation_and_decodes_only_it(server, client):
    first = client.observe(timeout=5)
    time.sleep(0.3)  # ~30 observations queue up at 100 Hz
    newest = client.observe(timeout=5)
    assert newest.seq >= first.seq + 10
    assert client.skipped_observations >= 5  # received behind a newer one: never decoded
