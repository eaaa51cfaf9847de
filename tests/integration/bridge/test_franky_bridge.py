"""The bridge on a real arm backend: BridgeServer + FrankyBackend (franky -> libfranka protocol ->
franka-sim), driven by RealRobotEnv and by a learner process that gets killed mid-chunk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from rlinf_robot.bridge import BridgeClient, BridgeServer, ServerConfig
from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv
from rlinf_robot.robot.franka.model import HOME_Q, tcp_pose
from rlinf_robot.rotations import quat_angle, quat_conjugate, quat_multiply, quat_to_rotvec

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DEADMAN_MS = 100.0
STOP_MS = 300.0  # a 0.2 rad/s joint decelerating at the hold dynamics factor (measured ~150 ms)

LEARNER = """
import sys, time, numpy as np
from rlinf_robot.bridge import BridgeClient
c = BridgeClient(endpoint=sys.argv[1]).connect()
c.acquire_lease()
actions = np.zeros((60, 7), np.float32)
actions[:, 0] = 0.02  # joint 1 at ~0.2 rad/s
print("ready", flush=True)
while True:  # a policy loop: a fresh 6 s chunk every 100 ms, until killed
    c.send_chunk(actions, "joint_delta", 10.0, obs=c.observe(timeout=10))
    time.sleep(0.1)
"""


def _first_still(client: BridgeClient, after_ns: int, timeout: float, max_speed: float = 0.02):
    """The first observation after ``after_ns`` at which every joint moved slower than ``max_speed``
    rad/s since the previous one. Speed from positions, not the reported velocities: franka-sim's
    joint 7 chatters at +-0.08 rad/s with 1e-4 rad amplitude while standing still."""
    deadline = time.monotonic() + timeout
    prev = None
    while time.monotonic() < deadline:
        o = client.observe(timeout=timeout)
        if o.stamp_ns <= after_ns:
            continue
        if prev is not None:
            speed = np.max(np.abs(o.joint_pos - prev.joint_pos)) / ((o.stamp_ns - prev.stamp_ns) / 1e9)
            if speed < max_speed:
                return o
        prev = o
    raise AssertionError(f"the arm did not stop within {timeout} s")


@pytest.fixture(scope="module")
def bridge(franka_sim_module):
    from rlinf_robot.bridge.franky_backend import FrankyBackend

    backend = FrankyBackend(franka_sim_module.host, dynamics_factor=0.3)
    server = BridgeServer(
        backend, ServerConfig(endpoint="tcp://127.0.0.1:*", obs_rate_hz=50.0, deadman_ms=DEADMAN_MS)
    ).start()
    yield server
    server.stop()


def test_real_robot_env_moves_the_arm_to_a_target_pose(bridge):
    home_tcp = tcp_pose(HOME_Q)
    goal = home_tcp[:3] + np.array([0.06, 0.05, -0.08])
    cfg = RealEnvConfig(
        action_mode="ee_delta",
        control_hz=10.0,
        task="fr3-reach",
        task_options={"goal": goal.tolist(), "success_radius": 0.005},
        max_episode_steps=80,
        start_from_task=False,
        auto_reset=False,
    )
    client = BridgeClient(endpoint=bridge.endpoint).connect()
    env = RealRobotEnv(client, cfg)
    try:
        obs = env.reset()
        sl = env.obs_spec.state_slices()
        np.testing.assert_allclose(obs["state"][0, sl["joint_pos"]], HOME_Q, atol=5e-3)
        for _ in range(80):  # a P controller on the pose: position error and rotation back to home's
            err = obs["state"][0, sl["goal_minus_tcp"]]
            rot = quat_to_rotvec(quat_multiply(home_tcp[3:], quat_conjugate(obs["state"][0, sl["tcp_quat"]])))
            obs, reward, terminated, truncated, info = env.step(
                0.5 * np.concatenate([err, rot])[None]
            )  # gain < 1: deltas are relative to the last target
            assert info["rejections"] == [[]]
            if terminated[0] or truncated[0]:
                break
        assert terminated[0], f"not reached: {np.linalg.norm(err) * 1e3:.1f} mm left"
        # independent check from the arm's own joints (franky): TCP within 5 mm of the goal, and
        # the orientation kept within 0.02 rad of the start
        pose = tcp_pose(bridge.backend.state().joint_pos)
        assert np.linalg.norm(pose[:3] - goal) < 0.005
        assert quat_angle(pose[3:], home_tcp[3:]) < 0.02
    finally:
        env.close()
        client.close()


def test_link_cut_mid_chunk_the_arm_holds(bridge):
    observer = BridgeClient(endpoint=bridge.endpoint).connect()
    observer.subscribe()
    proc = subprocess.Popen(
        [sys.executable, "-c", LEARNER, bridge.endpoint], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        moving = observer.observe(timeout=10, predicate=lambda o: abs(o.joint_vel[0]) > 0.1)
        assert moving.chunk_active
        t_kill = time.monotonic_ns()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    try:
        [deadman] = bridge.events.wait("deadman", 5, since_ns=t_kill)
        assert (deadman.t_ns - t_kill) / 1e6 <= DEADMAN_MS + 20.0
        still = _first_still(observer, after_ns=deadman.t_ns, timeout=5.0)
        print(f"arm still {(still.stamp_ns - t_kill) / 1e6:.0f} ms after the kill")
        assert (still.stamp_ns - t_kill) / 1e6 <= DEADMAN_MS + 20.0 + STOP_MS
        # and it stays put: nothing of the dead learner's chunk runs after the hold (the chunk would
        # have carried joint 1 another 0.1 rad in 0.5 s; what remains is the servo settling)
        assert not [e for e in bridge.events.find("step_applied") if e.t_ns > deadman.t_ns]
        later = observer.observe(timeout=5, predicate=lambda o: o.stamp_ns > still.stamp_ns + 500_000_000)
        assert np.max(np.abs(later.joint_pos - still.joint_pos)) < 0.015
        assert not later.chunk_active and bridge.status().state == "LINK_LOST"
    finally:
        observer.close()
