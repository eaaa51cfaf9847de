"""The robot PC side of the bridge (library and ROS node) never imports torch or Ray."""

from __future__ import annotations

import subprocess
import sys

from rlinf_robot.paths import REPO_ROOT

HEAVY = ("torch", "ray", "transformers", "mujoco")


def _heavy_after(imports: str) -> list[str]:
    code = (
        f"import sys; sys.path.insert(0, {str(REPO_ROOT / 'ros_ws' / 'src' / 'rlinf_ros')!r})\n"
        f"{imports}\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [m for m in out.stdout.strip().split(",") if m]


def test_bridge_library_is_light():
    assert (
        _heavy_after(
            "import rlinf_robot.bridge, rlinf_robot.bridge.stream_backend, "
            "rlinf_robot.bridge.direct, rlinf_robot.bridge.auth, rlinf_robot.robot.franka.arm"
        )
        == []
    )


def test_bridge_node_is_light():
    assert _heavy_after("import rlinf_ros.bridge_node") == []
