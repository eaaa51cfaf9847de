"""The whole robot PC: franka-sim + `rlinf-robot robot up --sim` (franka_node, camera_node,
bridge_node) + RealRobotEnv on a learner-side BridgeClient. The arm is measured independently, from
the ROS topics (/franka/ee_pose, /franka/joint_states), by a separate rclpy probe."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from rlinf_robot.bridge import BridgeClient, CommandRefused
from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv
from rlinf_robot.paths import REPO_ROOT
from rlinf_robot.robot.franka.model import HOME_Q, tcp_pose
from rlinf_robot.rotations import quat_conjugate, quat_multiply, quat_to_rotvec
from tests.integration.robot.conftest import RobotUp
from tests.integration.robot.probe import RosProbe
from tests.support.hybrid_run import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DEADMAN_MS = 100.0
#: After a link cut mid-chunk, joint 1 may travel at most this far: the steps applied before the
#: deadman trips (0.02 rad each, 10 Hz) and franka_node's braking at relative_dynamics_factor 0.2
#: (~0.01 rad from 0.2 rad/s), with room for a starved machine. The rest of the chunk is >= 1 rad.
MAX_TRAVEL_RAD = 0.1
#: A functional bound, not a latency goal: on a quiet machine the arm is still 0.2-0.5 s after the
#: kill; CPU-starved runs (franka-sim slower than real time) took up to 1.1 s.
STILL_WITHIN_S = 3.0
TRANSIENT = ("fault", "no_state", "stale_obs", "late")  # step refusals that say nothing is wrong with us

LEARNER = """
import sys, time, numpy as np
from rlinf_robot.bridge import BridgeClient
c = BridgeClient(endpoint=sys.argv[1]).connect()
c.acquire_lease()
obs = c.observe(timeout=10)
# one 6 s chunk moving joint 1 at 0.2 rad/s (10 Hz steps of 0.02 rad), then only heartbeats (the
# client's own thread) until killed: the link is cut mid-chunk
ramp = obs.joint_pos[:7] + np.outer(np.arange(1, 61) * 0.02, np.eye(7)[0])
c.send_chunk(ramp.astype(np.float32), "joint_position", 10.0, obs=obs)
print("ready", flush=True)
while True:
    time.sleep(1.0)
"""


@contextlib.contextmanager
def robot_output_on_failure(up: RobotUp):
    """Show what the robot PC's processes said when a test fails (their output is captured)."""
    try:
        yield
    except BaseException:
        print("---- robot up output (last lines) ----\n" + "\n".join(up.text().splitlines()[-80:]))
        raise


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    raw = yaml.safe_load((REPO_ROOT / "launch" / "config" / "sim_robot.yaml").read_text())
    bridge = next(v for k, v in raw.items() if k.endswith("bridge_node"))
    bridge["ros__parameters"].update(endpoint=endpoint, deadman_ms=DEADMAN_MS)  # a free port of our own
    config = tmp_path_factory.mktemp("bridge") / "sim_bridge.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    # franka-sim is one per machine (port 1337): wait for other sessions' servers to finish
    up = RobotUp("--sim", "--config", str(config), "--ready-timeout", "600")
    probe = None
    try:
        pids = up.ready(660)
        assert "bridge_node" in pids
        probe = RosProbe()
        yield endpoint, probe, up
    finally:
        if probe is not None:
            probe.close()
        code = up.stop()
    assert code == 0, up.text()[-3000:]


def test_robot_up_starts_the_bridge_and_real_robot_env_moves_the_arm_to_a_target_pose(stack):
    endpoint, probe, up = stack
    with robot_output_on_failure(up):
        _reach(endpoint, probe)


def _reach(endpoint: str, probe: RosProbe) -> None:
    home = tcp_pose(HOME_Q)
    goal = home[:3] + np.array([0.05, -0.04, -0.06])
    cfg = RealEnvConfig(
        action_mode="ee_delta",
        control_hz=10.0,
        task="fr3-reach",
        task_options={"goal": goal.tolist(), "success_radius": 0.005},
        max_episode_steps=150,
        cameras={"front": (96, 96, 3)},
        auto_reset=False,
    )
    client = BridgeClient(endpoint=endpoint, connect_timeout_s=30.0).connect()
    env = RealRobotEnv(client, cfg)
    try:
        obs = env.reset()
        assert obs["images"]["front"].shape == (1, 96, 96, 3) and obs["images"]["front"].std() > 0
        sl = env.obs_spec.state_slices()
        for _ in range(150):
            # A delta is relative to the last commanded target, which leads a lagging arm: a
            # feedback controller on the measured pose uses a gain below 1 per tick (protocol.md)
            err = obs["state"][0, sl["goal_minus_tcp"]]
            rot = quat_to_rotvec(quat_multiply(home[3:], quat_conjugate(obs["state"][0, sl["tcp_quat"]])))
            obs, _, terminated, truncated, info = env.step(0.5 * np.concatenate([err, rot])[None])
            # on a loaded machine franka-sim may reflex (franka_node recovers) or a step may come too
            # late: it is then refused and reported, never executed late; the next step goes on
            assert all(r["code"] in TRANSIENT for r in info["rejections"][0]), info["rejections"]
            if terminated[0] or truncated[0]:
                break
        assert terminated[0], f"{np.linalg.norm(err) * 1e3:.1f} mm from the goal"
        # independently, from franka_node's /franka/ee_pose: within 5 mm of the goal
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (
            probe.ee() is None or np.linalg.norm(probe.ee()[:3] - goal) > 0.005
        ):
            time.sleep(0.05)
        assert np.linalg.norm(probe.ee()[:3] - goal) < 0.005
        st = env.status()[0]
        assert st.counters["steps_applied"] >= 1 and "end_to_end" in st.latency_ms
    finally:
        env.close()
        client.close()


def _stamped(probe: RosProbe, t0: float) -> list[tuple[float, np.ndarray]]:
    """(capture wall time from the header, arm joint positions) of /franka/joint_states after ``t0``
    (wall clock). Header stamps, not arrival times: on a loaded machine messages arrive in bursts."""
    with probe.lock:
        out = [
            (m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, np.array(m.position[:7]))
            for _, m in probe.joint_states
        ]
    return sorted(((t, q) for t, q in out if t >= t0), key=lambda s: s[0])


def _speed_after(probe: RosProbe, t0: float, window: float = 0.05) -> list[tuple[float, float]]:
    """(wall time, max joint speed) from /franka/joint_states positions over ``window`` s, after
    ``t0`` (positions, not the velocity field: franka-sim's joint 7 chatters while standing still)."""
    samples = _stamped(probe, t0)
    out = []
    j = 0
    for i, (t, q) in enumerate(samples):
        while samples[j][0] < t - window:
            j += 1
        if j < i and t - samples[j][0] > 0.5 * window:
            out.append((t, float(np.max(np.abs(q - samples[j][1])) / (t - samples[j][0]))))
    return out


def _trace(probe: RosProbe, t0: float, every: float = 0.02) -> str:
    """Joint 1 after ``t0`` every ``every`` s (ms since t0: mrad from the first sample), for a failure message."""
    samples = _stamped(probe, t0)
    if not samples:
        return "no joint_states after t0"
    out, next_t = [], t0
    for t, q in samples:
        if t >= next_t:
            out.append(f"{(t - t0) * 1e3:.0f}:{(q[0] - samples[0][1][0]) * 1e3:.1f}")
            next_t = t + every
    return "joint 1 after the kill (ms:mrad) " + " ".join(out)


def test_link_cut_mid_chunk_the_arm_holds(stack):
    endpoint, probe, up = stack
    with robot_output_on_failure(up):
        _link_cut(endpoint, probe)


def _link_cut(endpoint: str, probe: RosProbe) -> None:
    observer = BridgeClient(endpoint=endpoint).connect()
    proc = subprocess.Popen([sys.executable, "-c", LEARNER, endpoint], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            s > 0.1 for _, s in _speed_after(probe, time.time() - 0.2)
        ):
            time.sleep(0.02)
        assert any(s > 0.1 for _, s in _speed_after(probe, time.time() - 0.3)), (
            f"the arm never moved: {observer.status().counters}"
        )
        t_kill = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    try:
        deadline = time.monotonic() + 5
        still = None
        while time.monotonic() < deadline and still is None:
            time.sleep(0.05)
            # still = slower than 0.02 rad/s over a whole 150 ms window (longer than the pauses
            # between the chunk's 10 Hz steps), dated from the window's start
            still = next((t - 0.15 for t, s in _speed_after(probe, t_kill, window=0.15) if s < 0.02), None)
        assert still is not None, "the arm did not stop"
        before = [q[0] for t, q in _stamped(probe, t_kill - 1.0) if t <= t_kill]
        travel = _stamped(probe, still)[0][1][0] - before[-1]
        print(f"arm still {(still - t_kill) * 1e3:.0f} ms after the kill, {travel * 1e3:.1f} mrad further")
        assert still - t_kill <= STILL_WITHIN_S and travel <= MAX_TRAVEL_RAD, _trace(probe, t_kill)
        time.sleep(0.6)  # then it stays put: the 6 s chunk would have moved joint 1 another 0.12 rad
        # (franka_node brakes to where the motion can stop; a hold at the measured joints used to
        # overshoot them and drive back at 0.2 rad/s; the servo's settling is a few mrad, slowly)
        speeds = _speed_after(probe, still + 0.1, window=0.15)
        assert speeds and max(s for _, s in speeds) < 0.05
        # joint 1 was moving forward. Driving back (the old hold at the measured joints: 7 mrad at
        # 0.2 rad/s) is a fast reversal; the simulated servo settling past a stop is a few mrad, slowly.
        samples = _stamped(probe, t_kill)
        t = np.array([s[0] for s in samples])
        q1 = np.array([s[1][0] for s in samples])
        back = np.max(np.maximum.accumulate(q1) - q1)
        assert back < 5e-3, f"after the kill joint 1 went back {back * 1e3:.1f} mrad"
        j = np.searchsorted(t, t - 0.05)
        ok = t - t[j] > 0.025
        back_speed = np.max(np.where(ok, (q1[j] - q1) / np.maximum(t - t[j], 1e-9), 0.0))
        assert back_speed < 0.05, f"after the kill joint 1 drove back at {back_speed:.2f} rad/s"
        st = observer.status()
        assert st.state == "LINK_LOST" and st.counters["deadman_trips"] >= 1
    finally:
        import json

        time.sleep(1.5)
        with probe.lock:
            tr = [
                (t - t_kill, list(m.position[:7]), list(m.velocity[:7]))
                for t, m in probe.joint_states
                if t >= t_kill - 0.5
            ]
        json.dump(tr, open("/tmp/linkcut_trace.json", "w"))
        observer.close()


def _home(client: BridgeClient, attempts: int = 3) -> None:
    """Home before a test about something else. A homing the deadman ended (a heartbeat gap of the
    test process on a busy machine: 'homing ended before home (hold)', seen in CI) is retried, as
    RealRobotEnv's reset does; anything else fails."""
    for attempt in range(attempts):
        try:
            client.command("home", timeout=60)
            return
        except CommandRefused as e:
            if e.code != "failed" or "(hold)" not in str(e) or attempt == attempts - 1:
                raise
            print(f"home attempt {attempt + 1} ended by a hold, retrying: {e}")
            _acquire(client)  # a deadman hold leaves the lease in place, a lapse does not


def _acquire(client: BridgeClient, timeout: float = 10.0) -> None:
    """Take the lease, waiting for a killed learner's (the link-cut test's) lease to lapse."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.acquire_lease()
            return
        except CommandRefused:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


#: A delta chunk's displacement equals its row sum within these (franka-sim's servo settles to
#: within ~1 mrad; its joint 7 chatters by 1-2 mrad, which moves the TCP < 0.3 mm).
ROW_SUM_TOL_RAD = 3e-3
ROW_SUM_TOL_M = 1.5e-3


#: Runs of a delta-chunk trial a hold may cut short before the test gives up.
CUT_ATTEMPTS = 3


def _delta_trial(client: BridgeClient, rows: np.ndarray, mode: str, hz: float, pieces: int):
    """Send ``rows`` as ``pieces`` chunks back to back from a settled arm; returns the chunk
    reports and how far the arm moved against the row sum (with the tolerance for the mode)."""
    from rlinf_robot.envs.real import Settled

    start = client.observe(timeout=30, predicate=Settled(0.004, window_s=0.5))
    seq, reports = -1, []
    for part in np.array_split(rows, pieces):
        if seq >= 0:  # the next piece is sent as the previous one ends
            o = client.observe(timeout=10, predicate=lambda o, s=seq: o.chunk_seq >= s and not o.chunk_active)
            reports.append(o.chunk_report)
        client.wait_link(30)  # a starved machine misses heartbeat answers for a moment
        seq = client.send_chunk(part, mode, hz, obs=client.latest)
    o = client.observe(timeout=10, predicate=lambda o, s=seq: o.chunk_seq >= s and not o.chunk_active)
    reports.append(o.chunk_report)
    end = client.observe(timeout=30, predicate=Settled(0.004, window_s=0.5))
    assert client.take_errors() == []
    if mode == "joint_delta":
        moved, want, tol = end.joint_pos[:7] - start.joint_pos[:7], rows.sum(axis=0), ROW_SUM_TOL_RAD
    else:
        moved, want, tol = end.ee_pose[:3] - start.ee_pose[:3], rows[:, :3].sum(axis=0), ROW_SUM_TOL_M
    ratio = np.linalg.norm(moved) / np.linalg.norm(want)
    print(
        f"{mode} {hz:g} Hz in {pieces} chunk(s): moved {np.round(moved, 4).tolist()}, "
        f"row sum {np.round(want, 4).tolist()}, ratio {ratio:.3f}, reports {reports}"
    )
    return reports, moved, want, tol, ratio


@pytest.mark.parametrize("mode", ["joint_delta", "ee_delta"])
@pytest.mark.parametrize("hz", [10.0, 50.0])
def test_a_delta_chunk_moves_the_arm_by_its_row_sum(stack, mode, hz):
    """On franka-sim through franka_node: rows are relative to the previous row's target, so a
    chunk moves the arm by the sum of its rows whatever the rate or the servo's lag (the old rule,
    each row added to the joints measured when it ran, moved 0.75-0.81x the sum at 10 Hz and
    0.21-0.23x at 50 Hz). Then the same motion as two chunks back to back adds up the same."""
    endpoint, probe, up = stack
    client = BridgeClient(endpoint=endpoint, connect_timeout_s=30.0).connect()
    with robot_output_on_failure(up):
        try:
            client.subscribe()
            _acquire(client)
            _home(client)
            horizon = int(hz)  # one second of rows
            rows = np.zeros((horizon, 7 if mode == "joint_delta" else 6), np.float32)
            if mode == "joint_delta":
                rows[:, [0, 3, 5]] = np.array([0.06, -0.05, 0.04]) / horizon
            else:
                rows[:, :3] = np.array([0.03, -0.025, 0.02]) / horizon
            for pieces in (1, 2):
                for attempt in range(CUT_ATTEMPTS):
                    reports, moved, want, tol, ratio = _delta_trial(client, rows, mode, hz, pieces)
                    if not any(r.get("cut") for r in reports) or attempt == CUT_ATTEMPTS - 1:
                        break
                    # a hold ended a chunk early (a heartbeat gap of this busy test process set off
                    # the 100 ms deadman, seen in CI): the report says so; the trial is run again
                    print(f"attempt {attempt + 1}: a hold cut the chunk short, running it again")
                    _acquire(client)
                assert not any(r.get("cut") for r in reports), reports
                if any(r.get("lead_clamped") for r in reports):
                    # the arm lagged its target by more than max_target_lead when the second piece
                    # came (ee rows at 50 Hz outrun franka-sim at relative_dynamics_factor 0.2):
                    # the rule starts that piece nearer the arm, and says so - it never overshoots
                    assert pieces == 2 and 0.5 < ratio < 1.0, (moved, want)
                    continue
                assert np.max(np.abs(moved - want)) < tol, (moved, want)
        finally:
            client.close()  # releases the lease for the next test
