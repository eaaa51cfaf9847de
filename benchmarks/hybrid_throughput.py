"""What running the arm costs the sim side: sim env-steps/s of a hybrid job while the franka-sim arm
runs real episodes in the same job, against a sim-only job of the same size, in the same run; and
the arm's utilisation (share of wall time it executes policy actions: not resetting, reconnecting
or waiting).

    python benchmarks/hybrid_throughput.py [--seconds 120]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def run_job(runs: Path, name: str, *overrides: str, timeout: float) -> list[dict]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_robot.cli",
            "train",
            *overrides,
            f"run.dir={runs}",
            f"run.id={name}",
            "run.progress=false",
            "eval.sim_episodes=0",
            "eval.arm_episodes=0",
            "eval.baseline_arm_episodes=0",
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise SystemExit(f"{name} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in (runs / name / "metrics.jsonl").read_text().splitlines()]


def sim_rate(rows: list[dict]) -> float:
    train = [r for r in rows if r["phase"] == "train"]
    key = "sim:fr3-reach/env_steps"
    steps = train[-1][key] - train[0][key]
    return steps / (train[-1]["wall_s"] - train[0]["wall_s"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--runs", type=Path, default=Path(tempfile.mkdtemp(prefix="hybrid-throughput-")))
    args = p.parse_args()
    t = args.seconds
    sim_only = run_job(args.runs, "sim_only", "mode=sim_only", f"budget.wall_s={t}", timeout=4 * t + 600)
    hybrid = run_job(
        args.runs, "hybrid", "budget.pretrain_wall_s=0", f"budget.wall_s={t}", timeout=4 * t + 900
    )
    ours, peer = sim_rate(hybrid), sim_rate(sim_only)
    util = [r["real:arm0/utilisation"] for r in hybrid if r.get("real:arm0/utilisation") is not None]
    episodes = hybrid[-1].get("real:arm0/episodes")
    print(
        f"sim-only job: {peer:,.0f} sim env-steps/s; hybrid job: {ours:,.0f} sim env-steps/s "
        f"with {episodes} real episodes in {t:g} s"
    )
    print(f"real-arm utilisation {util[-1]:.2f} (goal >= 0.8; median over updates {np.median(util):.2f})")
    print(
        f"RESULT hybrid_sim_throughput ours={ours:.0f}steps/s peer={peer:.0f}steps/s ratio={ours / peer:.2f} goal=>=0.7"
    )


if __name__ == "__main__":
    main()
