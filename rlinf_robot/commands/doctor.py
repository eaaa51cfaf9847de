"""Check this machine: Python packages, the franka-sim venv, the FR3 model, ROS 2, rendering."""

from __future__ import annotations

import importlib.util
import os
import shutil

from rlinf_robot.paths import fr3_mjcf_wrapper, franka_sim_venv

HELP = "check the installation and report what is missing"

#: (import name, extra that provides it, needed on a robot PC)
PACKAGES = [
    ("numpy", "core", True),
    ("msgspec", "core", True),
    ("yaml", "core", True),
    ("zmq", "robot", True),
    ("franky", "robot", True),
    ("rclpy", "ros", True),
    ("mujoco", "sim", False),
    ("cv2", "calibration", False),
    ("torch", "learn", False),
    ("ray", "learn", False),
    ("transformers", "learn", False),
]


def add_arguments(parser) -> None:
    parser.add_argument("--robot-pc", action="store_true", help="only check what a robot PC needs")
    parser.add_argument(
        "--calibration-dir", default=None, help="calibration store to check (default: the store's)"
    )


def run(args) -> int:
    problems = 0
    for name, extra, robot_pc in PACKAGES:
        if args.robot_pc and not robot_pc:
            continue
        ok = importlib.util.find_spec(name) is not None
        problems += not ok
        print(f"{'ok ' if ok else 'MISSING'}  {name:<13} (extra: {extra})")
    fsim = franka_sim_venv() / "bin" / "run-franka-sim-server"
    checks = [
        ("franka-sim venv", fsim.exists(), str(fsim)),
        ("FR3 MJCF wrapper", fr3_mjcf_wrapper().exists(), str(fr3_mjcf_wrapper())),
        (
            "MUJOCO_GL",
            bool(os.environ.get("MUJOCO_GL")),
            os.environ.get("MUJOCO_GL", "unset (osmesa on CPU)"),
        ),
        ("colcon", shutil.which("colcon") is not None, "colcon on PATH"),
    ]
    if not args.robot_pc:
        for label, ok, detail in checks:
            print(f"{'ok ' if ok else 'WARN   '}  {label:<17} {detail}")
    from calibration.store import CalibrationStore, status_lines

    # Warnings only: a stale or poor calibration matters on a real arm, where train/eval refuse it.
    for ok, label, detail in status_lines(CalibrationStore(args.calibration_dir)):
        print(f"{'ok ' if ok else 'WARN   '}  {label:<17} {detail}")
    print("doctor:", "all good" if problems == 0 else f"{problems} missing package(s)")
    return 1 if problems else 0
