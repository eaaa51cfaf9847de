"""The robot PC side must import light: no torch, Ray, MuJoCo or rclpy behind the core modules."""

import subprocess
import sys

HEAVY = ("torch", "ray", "mujoco", "rclpy", "franky", "transformers", "cv2")


def test_core_imports_stay_light():
    code = (
        "import sys, rlinf_robot, rlinf_robot.protocol, rlinf_robot.safety, rlinf_robot.errors, "
        "rlinf_robot.paths, rlinf_robot.cli\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported: {out.stdout.strip()}"


def test_no_pickle_in_project():
    """Nothing in the project may unpickle (or pickle) data: grep the sources."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent
    offenders = []
    for pkg in ("rlinf_robot", "sim", "policies", "calibration", "ros_ws/src"):
        for path in (root / pkg).rglob("*.py") if (root / pkg).exists() else []:
            text = path.read_text()
            if "import pickle" in text or "pickle.loads" in text or "cloudpickle" in text:
                offenders.append(str(path.relative_to(root)))
    assert offenders == []


def test_cli_lists_commands():
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "demo" in out.stdout and "doctor" in out.stdout
