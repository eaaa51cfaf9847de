"""Bad input at every entry point, 10,000 seeded cases each (issue 19, item 3).

    python benchmarks/fuzz_inputs.py [--cases 10000] [--seed 19003] [--only protocol,wire,ros,config,calibration]

The protocol decoder on random and mutated frames; a real BridgeServer over the wire on 127.0.0.1
(a client without the lease, then the lease holder's doomed chunks), over an in-memory arm that
must never move; the ROS command topics of a real ``franka_node`` on franka-sim (``robot up
--sim``; every case counted as taken or refused with a reason its defects name, no reflex, the arm
inside its limits and box); the training config loader (Hydra compose with random overrides, from_yaml on
mutated saved configs); the calibration store on corrupted record files. The cases and their
oracles are ``tests/faults/inputs.py`` (``make test`` runs a few hundred of each). A case is clean
when the entry point answered it as documented: a message / a record / a config, or its one
documented error (a ``ProtocolError`` code, the bridge's ``error`` with the right code and
``ref_seq``, counted; a ``ConfigError`` naming the key). The config loader is slow (Hydra composes
from scratch each time: about 0.1-0.3 s a case here).

Last line: ``RESULT fuzz_inputs ours=<clean cases> peer=<cases run> ratio=<ours/peer> goal=>=1``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.faults import inputs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10_000, help="cases per entry point")
    ap.add_argument("--seed", type=int, default=inputs.SEED)
    ap.add_argument("--only", default=",".join(inputs.RUNNERS), help="comma-separated entry points")
    args = ap.parse_args()
    ours = peer = 0
    for name in args.only.split(","):
        t = inputs.RUNNERS[name](args.cases, args.seed)
        print(t.line(), f"crashes {t.crashes}", flush=True)
        for f in t.failures:
            print("    " + f.strip().replace("\n", "\n    "), flush=True)
        ours += t.clean
        peer += t.ran
    ratio = ours / peer if peer else 0.0
    print(f"RESULT fuzz_inputs ours={ours} peer={peer} ratio={ratio:.4f} goal=>=1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
