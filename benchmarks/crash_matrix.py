"""The crash matrix of a running hybrid job (issue 19, item 2).

    .venv/bin/python benchmarks/crash_matrix.py [--repeat 1] [--seed 19002] [--only driver,env,...]

``robot up --sim`` and ``rlinf-robot train`` on it; for each target (the training driver, its Ray
workers ``env`` / ``rollout`` / ``actor`` / ``real``, and the robot PC's ``camera_node``,
``franka_node``, ``bridge_node``, ``franka_sim``) a fresh run, a ``kill -9`` at a seeded random
point of a real episode, then what a user does next (``train --resume``). Cases and bounds as
``tests/faults/crash_matrix.py`` defines them: a killed job process ends the job, its lease is
released and the arm holds still; a killed robot PC process is restarted by ``robot up`` and the
job carries on with real episodes; the resume continues the update count from the last
checkpoint; every episode committed before the kill is there byte for byte. About 3 minutes a case.

Last line: ``RESULT crash_matrix ours=<cases that met every bound> peer=<cases run> ratio=... goal=>=1``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.faults.crash_matrix import TARGETS, CrashMatrix  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--repeat", type=int, default=1, help="kills of each target (each at its own seeded point)"
    )
    ap.add_argument("--seed", type=int, default=19_002)
    ap.add_argument("--only", default=",".join(TARGETS), help="comma-separated targets")
    args = ap.parse_args()
    targets = [t for t in args.only.split(",") if t] * args.repeat
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        ap.error(f"unknown target(s) {unknown}; known: {list(TARGETS)}")
    results = []
    with tempfile.TemporaryDirectory(prefix="crash-matrix-") as tmp, CrashMatrix(Path(tmp), args.seed) as m:
        for i, target in enumerate(targets):
            res = m.run_case(target, f"{target}-{i}")
            results.append(res)
            print(res.row(), flush=True)
            for p in res.problems:
                print("    " + p.strip().replace("\n", "\n    ")[:3000], flush=True)
    ours = sum(r.ok for r in results)
    print(
        f"RESULT crash_matrix ours={ours} peer={len(results)} ratio={ours / max(1, len(results)):.3f} goal=>=1"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
