"""`rlinf-robot robot up --sim` (franka-sim + franka_node + camera_node from launch/config/sim_robot.yaml),
driven from a separate rclpy node: state stream, joint/EE commands, rejections, e-stop, home,
gripper, camera, and the supervision scenarios (franka-sim killed, franka_node killed, SIGINT).

One stack serves the whole module (tests run in file order; each leaves the arm ACTIVE).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from rlinf_robot.robot.franka.model import FINGER_JOINT_NAME, JOINT_NAMES, tcp_position
from rlinf_robot.robot.franka.model import HOME_Q as HOME
from tests.faults.ros_inputs import FAST_DIAG, run_ros
from tests.integration.robot.conftest import RobotUp, alive, derived_config, descendants
from tests.integration.robot.probe import wait_until, within

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    config = derived_config(
        tmp_path_factory.mktemp("stack"),
        "arm_stack.yaml",
        {"franka_sim", "franka_node", "camera_node"},
        FAST_DIAG,  # counters read per command by the topic fuzz below
    )
    up = RobotUp("--sim", "--config", str(config))
    try:
        up.pids = up.ready()
        yield up
    finally:
        up.stop()


@pytest.fixture(scope="module")
def arm(stack, probe):
    assert wait_until(lambda: probe.q() is not None and probe.state() == "ACTIVE", 30), stack.text()[-3000:]
    return probe


def reach(probe, target, timeout=20.0, tol=1e-3) -> bool:
    """Stream a joint command at ~50 Hz until the arm is within ``tol`` of it."""
    return wait_until(
        lambda: within(probe.q(), target, tol), timeout, action=lambda: probe.send_joints(target)
    )


def settle(probe, timeout: float = 10.0) -> None:
    """Wait until the arm has stopped: the previous test's last command has expired on the node
    (commands still queued in DDS under load arrive late but fresh, and move the arm on) and the
    motion it started has settled."""
    assert wait_until(lambda: probe.fresh_diag().get("goal") == "none", timeout), probe.diag
    prev = [probe.q()]

    def quiet() -> bool:
        q = probe.q()
        moved = np.abs(q - prev[0])
        prev[0] = q
        calm.append(np.max(moved[:6]) < 5e-5 and moved[6] < 1e-3 and probe.age() < 0.1)
        return len(calm) >= 3 and all(calm[-3:])  # quiet for 0.3 s, longer than a publishing hiccup

    calm: list[bool] = []
    assert wait_until(quiet, timeout, every=0.1), "the arm does not come to rest"


def still(probe, seconds: float = 0.5, tol: float = 1e-3, action=None) -> bool:
    """Whether the arm stays within ``tol`` for ``seconds`` while ``action`` runs (e.g. bad commands)."""
    settle(probe)
    q0 = probe.q()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if action is not None:
            action()
        if not within(probe.q(), q0, tol):
            return False
        time.sleep(0.02)
    return True


#: The state stream's rate is 200 Hz (``control_rate_hz``); what a test asserts is that it streams at
#: a rate of that order, not a latency goal (benchmarks/franka_node_jitter.py measures that): a quiet
#: machine delivers ~200 Hz, a 1-CPU cap with load beside it 95-98 Hz.
MIN_STREAM_HZ = 50.0


def test_joint_states_stream_at_the_control_rate(arm):
    start = len(arm.joint_states)
    assert wait_until(lambda: len(arm.joint_states) - start >= 400, 10)
    with arm.lock:
        window = list(arm.joint_states)[start:]
    times = np.array([t for t, _ in window])
    rate = (len(times) - 1) / (times[-1] - times[0])
    print(f"joint_states at {rate:.1f} Hz")
    assert rate >= MIN_STREAM_HZ, f"joint_states at {rate:.1f} Hz"
    msg = window[-1][1]
    assert list(msg.name) == [*JOINT_NAMES, FINGER_JOINT_NAME]
    assert msg.header.stamp.sec > 0


def test_joint_command_reaches_target_within_1mrad(arm):
    target = arm.q() + np.array([0.1, -0.05, 0.05, -0.1, 0.05, 0.05, 0.0])
    assert reach(arm, target), f"q-target={arm.q() - target} age={arm.age():.3f}s diag={arm.diag}"
    # The published EE pose is our FK of the published joints (the TCP, not franka-sim's O_T_EE).
    assert wait_until(lambda: np.linalg.norm(arm.ee()[:3] - tcp_position(arm.q())) < 1e-3, 2)


def test_ee_command_reaches_target_within_2mm(arm):
    start = arm.ee()
    target = start.copy()
    target[:3] += [0.03, -0.03, -0.04]
    ok = wait_until(
        lambda: np.linalg.norm(arm.ee()[:3] - target[:3]) < 2e-3, 20, action=lambda: arm.send_ee(target)
    )
    assert ok, f"ee={arm.ee()} target={target}"
    # orientation held: the commanded quaternion is the starting one
    assert abs(abs(float(np.dot(arm.ee()[3:], target[3:]))) - 1.0) < 1e-4


def test_nan_and_out_of_box_commands_are_rejected_and_counted(arm):
    before = arm.fresh_diag()
    nan = arm.q().copy()
    nan[2] = np.nan
    outside = arm.ee().copy()
    outside[2] = -0.3  # below the table: outside the workspace box

    def send_bad():
        arm.send_joints(nan)
        arm.send_ee(outside)

    assert still(arm, 0.6, action=send_bad), "the arm moved on a NaN / out-of-box command"
    after = arm.fresh_diag()
    assert int(after["rejected_non_finite"]) > int(before.get("rejected_non_finite", 0))
    assert int(after["rejected_workspace"]) > int(before.get("rejected_workspace", 0))
    assert after["state"] == "ACTIVE"


def test_stale_command_is_never_executed(arm):
    before = arm.count("rejected_stale")
    target = arm.q() + np.array([0.05, 0, 0, 0, 0, 0, 0])
    assert still(arm, 0.5, action=lambda: arm.send_joints(target, stamp_offset_s=-1.0))
    assert wait_until(lambda: arm.count("rejected_stale") > before, 5)


#: Seeded cases on the command topics here (10,000 in benchmarks/fuzz_inputs.py --only ros).
ROS_FUZZ_CASES = 300


def test_fuzzed_commands_are_each_taken_or_refused_and_counted_and_never_reach_franky_unsafe(arm):
    settle(arm)
    t = run_ros(ROS_FUZZ_CASES, probe=arm)
    print(t.line())
    assert t.ran >= 0.9 * ROS_FUZZ_CASES, t.line()
    assert t.clean == t.ran, t.line() + "\n" + "\n".join(t.failures)
    assert t.outcomes["taken"] > 0 and sum(v for k, v in t.outcomes.items() if k.startswith("refused:")) > 0


def test_stop_latches_until_reset(arm):
    resp = arm.trigger("stop")
    assert resp.success, resp.message
    assert wait_until(lambda: arm.state() == "ESTOP", 5)
    target = arm.q() + np.array([0.05, 0, 0, 0, 0, 0, 0])
    assert still(arm, 0.6, action=lambda: arm.send_joints(target)), "moved while stopped"
    assert arm.fresh_diag()["state"] == "ESTOP"
    resp = arm.trigger("reset")
    assert resp.success, resp.message
    assert wait_until(lambda: arm.state() == "ACTIVE", 5)
    assert reach(arm, target)


def test_home_service_returns_to_home(arm):
    resp = arm.trigger("home", timeout=60)
    assert resp.success, (resp.message, arm.q() - HOME, arm.diag)
    assert wait_until(lambda: within(arm.q(), HOME, 2e-3), 2), (arm.q() - HOME, arm.age(), arm.diag)


def test_while_homing_the_state_streams_and_stop_ends_the_home_call_at_once(arm):
    """home waits for the arm on a thread of its own: the 200 Hz state stream and the stop service
    are not held up, and a stop mid-way answers the home call at once (not after its 30 s timeout)."""
    away = HOME + np.array([0.5, 0, 0, 0, 0, 0, 0])
    assert reach(arm, away, tol=2e-3)
    settle(arm)
    result = {}
    homing = threading.Thread(target=lambda: result.update(resp=arm.trigger("home", timeout=60)))
    homing.start()
    assert wait_until(lambda: abs(arm.q()[0] - away[0]) > 0.02, 10), "home did not start moving"
    start = len(arm.joint_states)
    time.sleep(0.5)
    with arm.lock:
        window = list(arm.joint_states)[start:]
    stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in window])
    assert len(stamps) > 10 and (len(stamps) - 1) / (stamps[-1] - stamps[0]) >= MIN_STREAM_HZ
    assert homing.is_alive(), "homing already finished: the stop below would test nothing"
    t_stop = time.monotonic()
    assert arm.trigger("stop").success
    homing.join(10)
    assert not homing.is_alive() and time.monotonic() - t_stop < 2.0
    assert not result["resp"].success and "estop" in result["resp"].message, result["resp"].message
    assert arm.trigger("reset").success
    assert wait_until(lambda: arm.state() == "ACTIVE", 5)


def test_gripper_follows_the_finger_joint(arm):
    names = ["fr3_finger_joint1"]
    assert wait_until(
        lambda: abs(arm.joint_states[-1][1].position[7] - 0.01) < 1e-3,
        10,
        action=lambda: arm.send_joints([0.01], names=names),
    )
    assert wait_until(
        lambda: abs(arm.joint_states[-1][1].position[7] - 0.04) < 1e-3,
        10,
        action=lambda: arm.send_joints([0.04], names=names),
    )


def test_camera_images_follow_the_arm(arm):
    assert wait_until(lambda: len(arm.images) > 0, 20), "no camera image"
    first = arm.images[-1][1]
    assert (first.height, first.width, first.encoding) == (96, 96, "rgb8")
    before = np.frombuffer(bytes(first.data), np.uint8).reshape(96, 96, 3).astype(np.int16)
    target = arm.q() + np.array([0.4, 0, 0, 0, 0, 0, 0])
    assert reach(arm, target, tol=2e-3)
    t_arrived = time.monotonic()
    assert wait_until(lambda: arm.images[-1][0] > t_arrived + 0.2, 10)
    after = np.frombuffer(bytes(arm.images[-1][1].data), np.uint8).reshape(96, 96, 3).astype(np.int16)
    changed = np.mean(np.any(np.abs(after - before) > 30, axis=-1))
    assert changed > 0.01, f"only {changed:.3%} of the pixels changed after a 0.4 rad move"
    back = target - np.array([0.4, 0, 0, 0, 0, 0, 0])
    assert reach(arm, back, tol=2e-3), f"q-target={arm.q() - back} age={arm.age():.3f}s diag={arm.diag}"


def test_killing_franka_sim_reports_the_fault_and_reconnects(stack, arm):
    server_pid = int(stack.wait_for(r"\[franka_sim\] franka-sim ready \(pid (\d+)", 5).group(1))
    n_lines = len(stack.lines)
    os.kill(server_pid, signal.SIGKILL)
    assert wait_until(lambda: arm.count("link_lost") >= 1 and arm.diag.get("ACTIVE->DISCONNECTED") == "1", 20)
    stack.wait_for(r"franka-sim ready \(pid \d+, restarted\)", 30, start=n_lines)
    assert wait_until(lambda: arm.state() == "ACTIVE" and arm.count("reconnects") >= 1, 30), arm.diag
    assert reach(arm, arm.q() + np.array([0, 0.05, 0, 0, 0, 0, 0]))


def test_killing_franka_node_makes_robot_up_restart_it(stack, arm):
    old = stack.pids["franka_node"]
    n_lines = len(stack.lines)
    os.kill(old, signal.SIGKILL)
    new = int(
        stack.wait_for(r"robot up: franka_node running again \(pid (\d+)\)", 60, start=n_lines).group(1)
    )
    assert new != old
    count = len(arm.joint_states)
    assert wait_until(lambda: len(arm.joint_states) > count + 50, 20), (
        "no joint_states from the new franka_node"
    )
    assert wait_until(lambda: arm.state() == "ACTIVE", 10)
    assert reach(arm, arm.q() + np.array([0, 0, 0, 0, 0, 0.05, 0]))


def test_sigint_stops_every_child_without_orphans(stack):
    family = descendants(stack.proc.pid)
    assert len(family) >= 4  # franka_sim service, its server, franka_node, camera_node
    assert stack.stop(signal.SIGINT) == 0, stack.text()[-2000:]
    assert wait_until(lambda: not any(alive(p) for p in family), 15), [p for p in family if alive(p)]
