"""Robot PC bring-up without ``ros2 launch``: ``rlinf-robot robot up [--sim] [--config ...]``.

Starts the same processes as ``launch/robot.launch.py`` / ``launch/sim_robot.launch.py`` from the
same YAML: the franka-sim service (``--sim``), then every node of the YAML as its installed
executable; configures and activates the lifecycle nodes, prints a ready line, restarts a node
that crashes, and stops everything on SIGINT/SIGTERM: each process, in reverse start order, gets
the signal ``robot up`` got (then SIGTERM, then SIGKILL if it does not stop). Exits 0 once every
process stopped cleanly on that signal; non-zero, saying which process and why, when something
cannot start or did not stop cleanly.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from rlinf_robot.errors import ConfigError
from rlinf_robot.paths import REPO_ROOT

HELP = "robot PC bring-up: `robot up [--sim]` starts franka-sim (optional) and the ROS 2 nodes"
CONFIGS = {
    False: REPO_ROOT / "launch" / "config" / "robot.yaml",
    True: REPO_ROOT / "launch" / "config" / "sim_robot.yaml",
}
READY = "robot up: ready"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="robot_command", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start and supervise the robot PC processes")
    up.add_argument("--sim", action="store_true", help="also start a franka-sim server (no arm needed)")
    up.add_argument(
        "--config", type=Path, help="launch YAML (default: launch/config/robot.yaml or sim_robot.yaml)"
    )
    up.add_argument("--namespace", default="franka", help="ROS namespace of the nodes (default: franka)")
    up.add_argument("--robot-ip", help="override franka_node's robot_ip")
    up.add_argument(
        "--ready-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for each process to come up (franka-sim may wait for its lock)",
    )
    up.add_argument(
        "--dds-profile",
        default=None,
        help="Fast DDS profile for every node (default: launch/config/fastdds_loopback.xml, the ROS "
        "graph on 127.0.0.1 only; 'env' keeps the DDS settings of the environment)",
    )
    up.add_argument(
        "--max-restarts", type=int, default=5, help="restarts of one process per minute before giving up"
    )


def run(args) -> int:
    from rlinf_robot.robot.sched import normal_scheduling

    normal_scheduling()  # a supervisor started from a real-time thread must not pass that on
    config = args.config or CONFIGS[bool(args.sim)]
    halt = _Halt()

    def on_signal(signum, frame):
        if not halt.is_set():
            halt.signum = signum
        halt.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _up(args, config, halt)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Halt(threading.Event):
    """Set by SIGINT/SIGTERM; ``signum`` is the first signal, which the children get in turn."""

    signum: int = signal.SIGINT


def _up(args, config: Path, halt: _Halt) -> int:
    from rlinf_robot.robot.bringup.plan import make_plan
    from rlinf_robot.robot.bringup.ros_env import LOOPBACK_DDS_PROFILE, dds_env, install_env
    from rlinf_robot.robot.bringup.supervisor import StartError, Supervisor

    try:
        plan = make_plan(config, sim=args.sim, namespace=args.namespace, robot_ip=args.robot_ip)
    except ConfigError as exc:
        print(f"robot up: {exc}", file=sys.stderr, flush=True)
        return 2
    profile = None if args.dds_profile == "env" else Path(args.dds_profile or LOOPBACK_DDS_PROFILE)
    try:
        own = dds_env(dict(os.environ), profile)
    except FileNotFoundError as exc:
        print(f"robot up: {exc}", file=sys.stderr, flush=True)
        return 2
    # set here, so the supervisor's own lifecycle client (a participant too) and every child get it
    for key in set(os.environ) - set(own):
        del os.environ[key]
    os.environ.update(own)
    env = install_env()
    env.update(
        {"PYTHONUNBUFFERED": "1", "RCUTILS_COLORIZED_OUTPUT": "0", "RCUTILS_LOGGING_BUFFERED_STREAM": "1"}
    )
    supervisor = Supervisor(plan, env, max_restarts=args.max_restarts)
    lifecycle = None
    try:
        supervisor.start_all(args.ready_timeout, should_stop=halt.is_set)
        lifecycle = _lifecycle()
        for child in supervisor.children:
            if child.spec.lifecycle:
                _activate(lifecycle, child, args.ready_timeout, halt)
        supervisor.check_alive()
        pids = ", ".join(f"{c.name} (pid {c.pid})" for c in supervisor.children)
        print(f"{READY}: {pids}; namespace /{args.namespace.strip('/')}; config {config}", flush=True)
        while not halt.wait(0.2):
            for child in supervisor.restart_crashed():
                if child.spec.lifecycle:
                    _activate(lifecycle, child, args.ready_timeout, halt)
                print(f"robot up: {child.name} running again (pid {child.pid})", flush=True)
        print("robot up: stopping", flush=True)
    except StartError as exc:
        print(f"robot up: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        unclean = supervisor.stop_all(first=halt.signum)
        if lifecycle is not None:
            lifecycle.close()
    # Only an orderly stop gets here: every process must have stopped on its first signal, cleanly.
    for line in unclean:
        print(f"robot up: {line}", file=sys.stderr, flush=True)
    if unclean:
        return 1
    print("robot up: stopped", flush=True)
    return 0


def _lifecycle():
    from rlinf_robot.robot.bringup.lifecycle import LifecycleManager

    return LifecycleManager()


def _activate(lifecycle, child, timeout_s: float, halt: threading.Event) -> None:
    from rlinf_robot.robot.bringup.supervisor import StartError

    ok, why = lifecycle.bring_up(child.spec.fqn, timeout_s, should_stop=halt.is_set)
    if halt.is_set():
        return
    if not ok:
        if not child.alive():
            why = child.describe_exit()
        raise StartError(f"{child.name}: {why}")
