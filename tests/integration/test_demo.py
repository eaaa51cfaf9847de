"""`rlinf-robot demo` (what `make demo` runs) end to end: robot PC up on franka-sim, PPO in sim,
weights through safetensors, the policy on the arm through ROS 2 and the bridge, a report."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def test_demo_trains_in_sim_then_drives_the_arm_and_reports(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", "demo", "--out", str(tmp_path), "--arm-episodes", "1"],
        capture_output=True, text=True, timeout=800,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "sim-to-real slice" in out.stdout and "hybrid loop" in out.stdout  # labelled honestly
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["sim_training"]["reached"] and report["sim_eval_success"] >= 0.9
    assert (tmp_path / "policy.safetensors").stat().st_size > 0
    (episode,) = report["arm_episodes"]
    # the policy moved the real (franka-sim) arm towards a goal it had never seen
    assert episode["final_distance_mm"] < 0.5 * episode["start_distance_mm"], episode
    assert episode["rejections"] == {} or set(episode["rejections"]) <= {"late", "fault", "no_state"}
    counters = report["bridge_status"]["counters"]
    assert counters["steps_applied"] >= 100 and counters.get("deadman_trips", 0) == 0
    assert report["robot_up_exit"] == 0 and "error" not in report
