"""franka-sim starts offline from the FR3 wrapper, and franky (libfranka inside) drives it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rlinf_robot.paths import fr3_mjcf_wrapper, franka_sim_venv

pytestmark = pytest.mark.integration


def test_wrapper_points_at_shipped_fr3_model():
    text = fr3_mjcf_wrapper().read_text()
    assert "fr3.xml" in text and "meshdir" in text
    assert text.index("<include") < text.index("<compiler")  # compiler after include, or meshdir loses


def test_franky_connects_and_moves_a_joint(franka_sim):
    """Exactly the issue's check: connect from the main venv, move joint 1 by 0.1 rad, read it back."""
    code = (
        "from franky import Robot, RealtimeConfig, JointMotion\n"
        "r = Robot('127.0.0.1', realtime_config=RealtimeConfig.Ignore)\n"
        "r.relative_dynamics_factor = 0.2\n"
        "q0 = list(r.state.q)\n"
        "target = list(q0); target[0] += 0.1\n"
        "r.move(JointMotion(target))\n"
        "import time\n"
        "deadline = time.monotonic() + 3.0\n"  # the simulated servo settles after the trajectory ends
        "while abs(r.state.q[0] - target[0]) > 1e-3 and time.monotonic() < deadline: time.sleep(0.01)\n"
        "q1 = list(r.state.q)\n"
        "print(' '.join(repr(float(x)) for x in q0 + q1))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    values = np.array([float(x) for x in out.stdout.split()])
    q0, q1 = values[:7], values[7:]
    # franka-sim's simulated joint servo has a steady-state error of a few mrad that depends on
    # timing (CI measured 2.2 mrad under load); 5 mrad (0.3 deg) still proves the 0.1 rad move.
    assert q1[0] - q0[0] == pytest.approx(0.1, abs=5e-3)
    np.testing.assert_allclose(q1[1:], q0[1:], atol=5e-3)


def test_server_runs_from_its_own_venv(franka_sim):
    assert franka_sim.alive()
    exe = franka_sim.command()[0]
    assert exe.startswith(str(franka_sim_venv()))
    check = franka_sim_venv() / "bin" / "franka-sim-check"
    assert subprocess.run([str(check), "--timeout", "5"], capture_output=True, timeout=20).returncode == 0
