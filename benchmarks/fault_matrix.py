"""The fault matrix between two network hosts (issue 19, items 1, 2 and 7). Root only.

    sudo .venv/bin/python benchmarks/fault_matrix.py [--repeat 1] [--only partition,loss,bandwidth,delay,kill,job]

The robot PC (franka-sim, franka_node, bridge_node with CURVE on 10.231.0.1) and a learner in two
network namespaces joined by a veth pair; one fault at a time on the link while the learner drives
the arm, or a ``kill -9`` of one of its processes; figures and bounds as
``tests/faults/link_matrix.py`` defines them (``make test`` runs five of these rows in
``tests/faults/test_link_faults.py``). The ``job`` rows put the whole hybrid job
(``rlinf-robot train``, its Ray cluster on the learner host) in the learner's place
(``tests/faults/job_link.py``): sim training goes on while the arm is cut off, the episode the
fault cut is aborted, real episodes come back. Then the sockets the robot PC listens
on, as ``ss`` lists them inside its namespace.

Last line: ``RESULT fault_matrix ours=<rows that met every bound> peer=<rows run> ratio=... goal=>=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.faults.job_link import run_job_case  # noqa: E402
from tests.faults.link_matrix import LinkStack, Row, table  # noqa: E402
from tests.faults.netlab import Fault, NetLab, unavailable  # noqa: E402

MATRIX = [
    Fault("partition", 0.05),
    Fault("partition", 0.5),
    Fault("partition", 5.0),
    Fault("partition", None),
    Fault("loss", 3.0, 5),
    Fault("loss", 3.0, 20),
    Fault("bandwidth", 3.0, 256),
    Fault("bandwidth", 3.0, 32),
    Fault("delay", 3.0, 200),
    Fault("delay", 3.0, 100, jitter=100),
    Fault("delay", 3.0, 700),
    Fault("kill", target="bridge_node"),
    Fault("kill", target="franka_node"),
    Fault("kill", target="franka_sim"),
]
#: Under the hybrid job (``--only job``): the link cut for 5 s mid-episode, and 20 % loss.
JOB_MATRIX = [Fault("partition", 5.0), Fault("loss", 3.0, 20)]


def _workdir(keep: Path | None, name: str):
    """A temporary directory, or ``keep/name`` kept after the run."""
    if keep is None:
        return tempfile.TemporaryDirectory(prefix=f"fault-matrix-{name}-")
    (keep / name).mkdir(parents=True, exist_ok=True)
    return contextlib.nullcontext(str(keep / name))


def _say(row: Row) -> Row:
    print(f"{row.fault}: {'met' if row.ok else '; '.join(row.problems)}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs of each row")
    ap.add_argument(
        "--only", default="partition,loss,bandwidth,delay,kill,job", help="comma-separated fault kinds"
    )
    ap.add_argument(
        "--keep", type=Path, help="write the agents' logs here and keep them (default: a temp dir)"
    )
    args = ap.parse_args()
    why = unavailable()
    if why:
        print(f"fault_matrix: cannot run: {why}")
        return 2
    kinds = set(args.only.split(","))
    faults = [f for f in MATRIX if f.kind in kinds] * args.repeat
    job_faults = JOB_MATRIX * args.repeat if "job" in kinds else []
    rows, listening = [], []
    if faults:
        with (
            _workdir(args.keep, "links") as tmp,
            NetLab() as lab,
            LinkStack(lab, Path(tmp)) as stack,
        ):
            for i, fault in enumerate(faults):
                rows.append(_say(stack.run(fault, f"case{i}")))
            listening = lab.listening(lab.robot)
    if job_faults:  # the hybrid job's env waits for camera images: a robot PC with its camera_node
        with (
            _workdir(args.keep, "job") as tmp,
            NetLab() as lab,
            LinkStack(lab, Path(tmp), camera=True) as stack,
        ):
            for i, fault in enumerate(job_faults):
                rows.append(_say(run_job_case(stack, fault, f"job{i}")))
            listening = listening or lab.listening(lab.robot)
    print()
    print(table(rows))
    print("\nrobot PC sockets (ss -ltnup in its namespace; * = on every address):")
    for sock in listening:
        print(("  * " if sock.wildcard else "    ") + sock.line)
    ours, peer = sum(r.ok for r in rows), len(rows)
    print(f"RESULT fault_matrix ours={ours} peer={peer} ratio={ours / peer:.3f} goal=>=1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
