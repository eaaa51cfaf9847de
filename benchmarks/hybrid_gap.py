"""Does hybrid training close the sim-to-real gap that sim-only training leaves open?

Same wall-clock training budget and seed for both:
  (a) sim-only: `rlinf-robot train mode=sim_only warm_start.demos=0` (PPO from scratch, as the
      hybrid job's pre-training is), then the policy deployed on the franka-sim arm
      (`rlinf-robot eval --on arm`);
  (b) hybrid: `rlinf-robot train` (sim pre-training, then real-arm + sim rollouts in one loop), its
      final evaluation on the arm.
The arm is the embedded default's (franka-sim behind franka_node and the bridge, serving an FR3
with more damping and friction and a payload); success is judged within the sim task's own
episode length, deterministic, over --episodes episodes each, with 95 % intervals.

    python benchmarks/hybrid_gap.py [--budget 300] [--episodes 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rlinf_robot.orchestrator.stats import wilson  # noqa: E402


def cli(*args: str, timeout: float) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", *args], capture_output=True, text=True, timeout=timeout
    )
    if out.returncode != 0:
        raise SystemExit(
            f"{' '.join(args)} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )
    return out.stdout


def latest_eval(run: Path) -> dict:
    return json.loads(sorted(run.glob("eval-*.json"))[-1].read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=300.0, help="training wall time of each run (s)")
    p.add_argument(
        "--pretrain", type=float, default=90.0, help="of which the hybrid run pre-trains in sim (s)"
    )
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", type=Path, default=Path(tempfile.mkdtemp(prefix="hybrid-gap-")))
    args = p.parse_args()
    common = [f"seed={args.seed}", f"run.dir={args.runs}", "run.progress=false", "eval.sim_episodes=64"]
    t0 = time.monotonic()
    cli(
        "train",
        "mode=sim_only",
        "warm_start.demos=0",  # both learners from scratch: the hybrid job's pre-training has no warm start
        f"budget.wall_s={args.budget}",
        "run.id=sim_only",
        *common,
        timeout=3 * args.budget + 600,
    )
    cli(
        "eval",
        str(args.runs / "sim_only"),
        f"eval.arm_episodes={args.episodes}",
        "--on",
        "arm",
        timeout=60 * args.episodes + 900,
    )
    sim_only = latest_eval(args.runs / "sim_only")["arm"]
    cli(
        "train",
        f"budget.pretrain_wall_s={args.pretrain}",
        f"budget.wall_s={args.budget - args.pretrain}",
        f"eval.arm_episodes={args.episodes}",
        "eval.baseline_arm_episodes=0",
        "run.id=hybrid",
        *common,
        timeout=3 * args.budget + 60 * args.episodes + 900,
    )
    hybrid = json.loads((args.runs / "hybrid" / "eval.json").read_text())["arm"]
    a = wilson(sim_only["successes"], sim_only["n"])
    b = wilson(hybrid["successes"], hybrid["n"])
    print(
        f"budget {args.budget:g} s of training each, seed {args.seed}, {args.episodes} arm episodes each "
        f"({time.monotonic() - t0:.0f} s in all; runs in {args.runs})"
    )
    print(f"sim-only then deploy: arm success {a}")
    print(f"hybrid              : arm success {b} (goal >= 0.9)")
    ratio = b.rate / a.rate if a.rate > 0 else float("inf")
    print(f"RESULT hybrid_gap ours={b.rate:.3f} peer={a.rate:.3f} ratio={ratio:.2f} goal=>=1.5")


if __name__ == "__main__":
    main()
