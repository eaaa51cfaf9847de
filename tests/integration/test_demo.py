"""`rlinf-robot demo` (what `make demo` runs) end to end, with smaller budgets than the real demo:
sim pre-training, the robot PC up on franka-sim, the sim-only baseline on the arm, the hybrid loop
with both sources, evaluation on sim and on the arm, the report - what the README promises, in
that order, and a zero exit only when every stage ran."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]


def test_demo_runs_the_hybrid_loop_and_reports(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_robot.cli",
            "demo",
            f"run.dir={tmp_path}",
            "run.id=demo",
            "budget.pretrain_wall_s=30",
            "budget.wall_s=45",
            "eval.sim_episodes=16",
            "eval.arm_episodes=3",
            "eval.baseline_arm_episodes=2",
        ],
        capture_output=True,
        text=True,
        timeout=1400,
    )
    text = out.stdout
    assert out.returncode == 0, text[-5000:] + out.stderr[-2000:]
    stages = [
        "cluster up",
        "pre-training in sim",
        "robot PC ready",
        "arm eval (baseline",
        "train    update",
        "sim eval",
        "arm eval (final policy)",
        "report:",
        "robot PC stopped (exit 0",
    ]
    at = [text.find(s) for s in stages]
    assert all(i >= 0 for i in at) and at == sorted(at), list(zip(stages, at, strict=True))
    run = tmp_path / "demo"
    ev = json.loads((run / "eval.json").read_text())
    assert ev["sim"]["n"] >= 16 and ev["arm"]["n"] == 3 and ev["baseline_arm"]["n"] == 2
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["phase"] == "train"]
    assert train and train[-1]["real:arm0/episodes"] >= 1 and train[-1]["sim:fr3-reach/env_steps"] > 0
    assert any(r["batch/real_share"] > 0 for r in train)
    assert re.search(r"arm eval \(final policy\): success [0-9.]+ \[", text)
    assert (run / "report.html").stat().st_size > 10_000 and (run / "robot_pc.log").exists()
