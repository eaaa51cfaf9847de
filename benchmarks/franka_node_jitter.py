"""franka_node vs franky direct: command -> applied latency and state-stream period jitter.

Against one franka-sim server, at 100 Hz and 500 Hz:
- direct (the reference, no ROS): one loop at the rate reads ``robot.state`` and hands the latest
  command (written by a 47 Hz "policy" thread) to franky as an async JointMotion;
- node: ``franka_node`` started as its installed executable (configured and activated over its
  lifecycle services); a separate rclpy node publishes ``joint_command`` at 47 Hz and receives
  ``joint_states``.
Both control loops run SCHED_FIFO 20 (the node's ``loop_priority``); 47 Hz is no divisor of the
loop rates, so commands arrive at every phase of a period in both cases.
Latency = command stamp -> its motion handed to franky (the node reports it on /diagnostics; the
direct loop measures it the same way). Jitter = |period - 1/rate| of the state stream, as the
subscriber sees it for the node and as the loop reads it for direct. p50/p99 in ms; ratio =
node / direct. The issue sets no number; the RESULT line is the p99 command -> applied latency at
100 Hz with our goal: the ROS node may cost at most twice franky alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from rlinf_robot.robot.sched import keep_scheduling

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
_TMP = Path(tempfile.mkdtemp(prefix="franka-node-bench-"))
os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("FASTDDS_BUILTIN_TRANSPORTS", "UDPv4")
os.environ.setdefault("ROS_LOG_DIR", str(_TMP / "ros_log"))

from rlinf_robot.robot.bringup.lifecycle import LifecycleManager  # noqa: E402
from rlinf_robot.robot.bringup.ros_env import executable, install_env  # noqa: E402
from rlinf_robot.robot.franka.sim_server import FrankaSimServer  # noqa: E402
from rlinf_robot.robot.sched import normal_scheduling, set_thread_priority  # noqa: E402
from tests.integration.robot.probe import RosProbe  # noqa: E402

RATES = (100, 500)
SECONDS = 6.0
POLICY_HZ = 47.0  # not a divisor of the loop rates: commands arrive at every phase of a period
PRIORITY = 20  # SCHED_FIFO of both control loops (launch/config/sim_robot.yaml's loop_priority)
AMPLITUDE = 0.05  # rad on joint 1 and 4, slow sine: always within the safety filter's step


def command(t: float, q0: np.ndarray) -> np.ndarray:
    s = np.sin(2 * np.pi * 0.25 * t)
    return q0 + AMPLITUDE * s * np.array([1, 0, 0, -1, 0, 0, 0])


def jitter(times: list[float], rate: float) -> np.ndarray:
    periods = np.diff(np.asarray(times))
    return np.abs(periods - 1.0 / rate) * 1e3


def direct(rate: float) -> dict[str, float]:
    from franky import JointMotion, RealtimeConfig, Robot

    with keep_scheduling():  # libfranka would make this thread SCHED_FIFO 99 (see rlinf_robot.robot.sched)
        with keep_scheduling():  # libfranka makes the connecting thread SCHED_FIFO 99 otherwise
            robot = Robot("127.0.0.1", realtime_config=RealtimeConfig.Ignore)
    robot.relative_dynamics_factor = 0.2
    set_thread_priority(PRIORITY)  # the same real-time slot as the node's loop
    q0 = np.array(robot.current_joint_positions)
    latest: list = [None]  # (target, wall stamp)
    stop = threading.Event()

    def policy():
        normal_scheduling()  # like the node's command publisher: an ordinary process
        t0 = time.monotonic()
        k = 0
        while not stop.is_set():
            latest[0] = (command(time.monotonic() - t0, q0), time.time())
            k += 1
            time.sleep(max(0.0, t0 + k / POLICY_HZ - time.monotonic()))

    threading.Thread(target=policy, daemon=True).start()
    reads, latency, applied = [], [], None
    period = 1.0 / rate
    t0 = next_t = time.monotonic()
    while time.monotonic() - t0 < SECONDS:
        robot.state  # noqa: B018 - the read is the point
        reads.append(time.monotonic())
        cmd = latest[0]
        if cmd is not None and cmd is not applied:
            robot.move(JointMotion([float(x) for x in cmd[0]], return_when_finished=False), asynchronous=True)
            latency.append((time.time() - cmd[1]) * 1e3)
            applied = cmd
        next_t += period
        time.sleep(max(0.0, next_t - time.monotonic()))
    stop.set()
    set_thread_priority(0)
    robot.move(JointMotion([float(x) for x in q0]), asynchronous=True)
    robot.join_motion(timeout=10.0)
    normal_scheduling()
    del robot
    j = jitter(reads, rate)
    return {
        "lat_p50": np.percentile(latency, 50),
        "lat_p99": np.percentile(latency, 99),
        "jit_p50": np.percentile(j, 50),
        "jit_p99": np.percentile(j, 99),
    }


def node(rate: float, probe: RosProbe, lifecycle: LifecycleManager) -> dict[str, float]:
    params = _TMP / f"franka_{rate}.yaml"
    params.write_text(
        "/**/franka_node:\n  ros__parameters:\n    robot_ip: 127.0.0.1\n    gripper: false\n"
        f"    control_rate_hz: {float(rate)}\n    relative_dynamics_factor: 0.2\n    diagnostics_rate_hz: 5.0\n"
        f"    loop_priority: {PRIORITY}\n"
    )
    exe = executable("rlinf_ros", "franka_node")
    proc = subprocess.Popen(
        [str(exe), "--ros-args", "-r", "__ns:=/franka", "--params-file", str(params)],
        env=install_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ok, why = lifecycle.bring_up("/franka/franka_node", 60.0)
        assert ok, why
        assert _wait(lambda: probe.q() is not None and probe.state() == "ACTIVE", 20)
        q0 = probe.q()
        start = len(probe.joint_states)
        t0 = time.monotonic()
        k = 0
        while time.monotonic() - t0 < SECONDS:
            probe.send_joints(command(time.monotonic() - t0, q0))
            k += 1
            time.sleep(max(0.0, t0 + k / POLICY_HZ - time.monotonic()))
        with probe.lock:
            reads = [t for t, _ in list(probe.joint_states)[start:]]
        diag = probe.fresh_diag()
        j = jitter(reads, rate)
        return {
            "lat_p50": float(diag["command_latency_p50_ms"]),
            "lat_p99": float(diag["command_latency_p99_ms"]),
            "jit_p50": np.percentile(j, 50),
            "jit_p99": np.percentile(j, 99),
            "loop_p50": float(diag["period_p50_ms"]),
            "loop_p99": float(diag["period_p99_ms"]),
        }
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        probe.joint_states.clear()
        probe.diag = {}


def _wait(cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def main() -> None:
    results: dict[tuple[str, int], dict[str, float]] = {}
    with FrankaSimServer(gripper=False):
        probe, lifecycle = RosProbe(), LifecycleManager("franka_bench")
        try:
            for rate in RATES:
                results[("direct", rate)] = direct(rate)
                results[("node", rate)] = node(rate, probe, lifecycle)
        finally:
            lifecycle.close()
            probe.close()
    print(
        f"{'':10}{'rate':>6}  {'cmd->applied p50':>17} {'p99':>8}  {'state jitter p50':>17} {'p99':>8}  (ms)"
    )
    for rate in RATES:
        for who in ("direct", "node"):
            r = results[(who, rate)]
            print(
                f"{who:10}{rate:>6}  {r['lat_p50']:>17.3f} {r['lat_p99']:>8.3f}  {r['jit_p50']:>17.3f} {r['jit_p99']:>8.3f}"
            )
        n, d = results[("node", rate)], results[("direct", rate)]
        print(
            f"{'ratio':10}{rate:>6}  {n['lat_p50'] / d['lat_p50']:>17.2f} {n['lat_p99'] / d['lat_p99']:>8.2f}  "
            f"{n['jit_p50'] / d['jit_p50']:>17.2f} {n['jit_p99'] / d['jit_p99']:>8.2f}"
        )
    for rate in RATES:
        n = results[("node", rate)]
        print(
            f"node {rate} Hz: its own control loop period p50 {n['loop_p50']:.3f} ms, p99 {n['loop_p99']:.3f} ms "
            f"(nominal {1e3 / rate:.3f} ms; the subscriber-side jitter above adds DDS delivery and the receiver)"
        )
    ours, peer = results[("node", 100)]["lat_p99"], results[("direct", 100)]["lat_p99"]
    print(
        f"RESULT franka_node_cmd_latency_p99_100hz ours={ours:.3f}ms peer={peer:.3f}ms ratio={ours / peer:.2f} goal=<=2"
    )


if __name__ == "__main__":
    main()
