"""Does a real-to-sim-to-real session beat training on the nominal sim for the same budget?

One `rlinf-robot session` on the embedded default (`conf/session.yaml`): franka-sim serving an FR3
with more damping and friction and a payload, behind franky, franka_node and the bridge, in a cell
whose front camera stands where its rendered ChArUco views put it (`calibration.scene.CELL_CAMERAS`),
not where the nominal training scene has its front camera. The task is reach with the goal seen
through that camera (`fr3-reach` `goal_camera=front`: the policy gets the goal's position in the
camera's frame, as a detector on it reports, and its own joints and TCP from the arm), so acting on
it needs to know where the camera stands. The session calibrates the camera (eye-to-hand on
rendered views), identifies the arm's dynamics, trains PPO in the calibrated sim (camera placed
where hand-eye found it, dynamics randomized around the fit) and fine-tunes in the hybrid loop; its
`nominal` stage trains the same policy on the nominal sim for the sim and hybrid stages' budgets
together (the peer). Every policy is evaluated on the arm, deterministic, --episodes episodes each,
within the sim task's own episode length, with 95 % intervals. A fresh calibration store each run,
so the session calibrates and identifies the arm itself.

    python benchmarks/r2s2r_gain.py [--sim 90] [--hybrid 180] [--episodes 20] [--seed 0]
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sim", type=float, default=90.0, help="sim stage's training wall time (s)")
    p.add_argument("--hybrid", type=float, default=180.0, help="hybrid stage's training wall time (s)")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", type=Path, default=Path(tempfile.mkdtemp(prefix="r2s2r-")))
    args = p.parse_args()
    t0 = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "rlinf_robot.cli",
        "session",
        f"seed={args.seed}",
        f"run.dir={args.runs}",
        "run.id=session",
        "run.progress=false",
        f"calibration.store={args.runs / 'store'}",
        f"session.sim_wall_s={args.sim}",
        f"session.hybrid_wall_s={args.hybrid}",
        f"eval.arm_episodes={args.episodes}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=6 * (args.sim + args.hybrid) + 2400)
    if out.returncode != 0:
        raise SystemExit(f"session failed ({out.returncode}):\n{out.stdout[-4000:]}\n{out.stderr[-3000:]}")
    done = json.loads((args.runs / "session" / "session.json").read_text())["done"]
    sysid, arm = done["sysid"], done["eval"]["arm"]
    before, after = sysid["residual_rms_before_rad"], sysid["residual_rms_rad"]
    print(
        f"session of {args.sim:g} s sim + {args.hybrid:g} s hybrid training, nominal peer "
        f"{args.sim + args.hybrid:g} s, seed {args.seed}, {args.episodes} arm episodes each "
        f"({time.monotonic() - t0:.0f} s in all; runs in {args.runs})"
    )
    print(
        f"sysid replay residual: {1e3 * before:.3f} -> {1e3 * after:.4f} mrad rms ({before / max(after, 1e-12):.0f}x smaller)"
    )
    rates = {name: wilson(r["successes"], r["n"]) for name, r in arm.items()}
    for name, label in (
        ("nominal", "nominal sim"),
        ("sim", "calibrated sim"),
        ("hybrid", "session (hybrid)"),
    ):
        print(f"{label:17s}: arm success {rates[name]}")
    ours, peer = rates["hybrid"].rate, rates["nominal"].rate
    ratio = ours / peer if peer > 0 else float("inf")
    print(f"RESULT r2s2r_gain ours={ours:.3f} peer={peer:.3f} ratio={ratio:.2f} goal=>=1.5")


if __name__ == "__main__":
    main()
