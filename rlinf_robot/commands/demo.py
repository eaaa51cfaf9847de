"""The main job on the embedded default.

Until the hybrid training loop lands (orchestrator issue), this runs the slice that exists and says
so: start franka-sim (the MuJoCo FR3 speaking the real libfranka protocol), connect with franky,
pass joint targets through the safety filter, move the arm, and report what happened.
"""

from __future__ import annotations

import time

import numpy as np

from rlinf_robot.robot.sched import keep_scheduling

HELP = "run the demo on the embedded default (franka-sim + franky + safety filter)"


def add_arguments(parser) -> None:
    parser.add_argument("--moves", type=int, default=4, help="number of joint moves")
    parser.add_argument("--amplitude", type=float, default=0.15, help="joint offset per move (rad)")


def run(args) -> int:
    from franky import JointMotion, RealtimeConfig, Robot

    from rlinf_robot.robot.franka.sim_server import FrankaSimServer
    from rlinf_robot.safety import ArmAction, RobotState, SafetyFilter

    print("rlinf-robot demo - foundation slice: franka-sim + franky + safety filter.")
    print("(The hybrid sim+real training loop replaces this once the orchestrator lands.)")
    t0 = time.monotonic()
    with FrankaSimServer(gripper=False) as server:
        print(f"[{time.monotonic() - t0:5.2f}s] franka-sim ready (log {server.log_path})")
        with keep_scheduling():  # libfranka makes the connecting thread SCHED_FIFO 99 otherwise
            robot = Robot(server.host, realtime_config=RealtimeConfig.Ignore)
        robot.relative_dynamics_factor = 0.2
        home = np.array(robot.state.q)
        print(f"[{time.monotonic() - t0:5.2f}s] connected; q = {np.round(home, 3).tolist()}")
        safety = SafetyFilter(control_hz=1.0)  # one target per move: the step cap is the binding limit
        rng = np.random.default_rng(0)
        errors = []
        requests = [rng.uniform(-1, 1, 7) * args.amplitude for _ in range(args.moves)]
        requests.append(np.full(7, np.nan))  # a bad command: must be rejected, arm must not move
        for i, delta in enumerate(requests):
            q = np.array(robot.state.q)
            decision = safety.check(ArmAction("joint_delta", delta), RobotState(joint_pos=q))
            if not decision:
                print(f"[{time.monotonic() - t0:5.2f}s] move {i}: rejected ({decision.reason}) - arm holds")
                continue
            robot.move(JointMotion([float(x) for x in decision.target]))
            reached = np.array(robot.state.q)
            err = float(np.max(np.abs(reached - decision.target)))
            errors.append(err)
            adj = ",".join(decision.adjustments) or "none"
            print(
                f"[{time.monotonic() - t0:5.2f}s] move {i}: |dq|max={np.max(np.abs(decision.target - q)):.3f} "
                f"rad, adjustments={adj}, final error {err * 1e3:.2f} mrad"
            )
        robot.move(JointMotion([float(x) for x in home]))
        print("\nreport")
        print(f"  moves executed       : {len(errors)} / {len(requests)} requested")
        print(f"  worst final error    : {max(errors) * 1e3:.2f} mrad")
        print(f"  safety decisions     : {safety.snapshot()}")
        print(f"  wall time            : {time.monotonic() - t0:.1f} s")
    return 0 if errors and max(errors) < 1e-2 else 1
