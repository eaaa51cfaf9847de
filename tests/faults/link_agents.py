"""The two bridge clients of a link-fault case, each run as a process on its own host (namespace):

    python -m tests.faults.link_agents pilot    --endpoint E --keys DIR --out FILE --seconds S
    python -m tests.faults.link_agents observer --endpoint E --keys DIR --out FILE --seconds S

``pilot`` (on the learner host) is a learner: it holds the lease and, from each new observation,
sends a 4-row ``joint_delta`` chunk (20 Hz) swinging joint 1 slowly back and forth, through the
project's ``BridgeClient`` with CURVE keys, and goes on after the link returns as a learner does.
``observer`` (on the robot PC, so the link fault does not touch it) subscribes and records every
observation it gets and every unsolicited status (the deadman's) as it arrives.

Both write JSON lines, flushed per line, so the case driver can follow them live; every time is
``CLOCK_MONOTONIC`` (one clock for every namespace of the machine), the bridge's stamps too.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from rlinf_robot.bridge import BridgeClient
from rlinf_robot.bridge.config import ClientConfig, CurveClientKeys
from rlinf_robot.bridge.errors import BridgeError
from rlinf_robot.errors import LinkLost

RATE_HZ = 20.0
ROW = 0.004  # rad per row on joint 1: 0.08 rad/s
SWING = 0.2  # rad either side of where the pilot found the arm


def _client(args, name: str) -> BridgeClient:
    keys = Path(args.keys)
    cfg = ClientConfig(
        endpoint=args.endpoint,
        client_id=name,
        curve=CurveClientKeys(keys / f"{name}.key_secret", keys / "robot.key"),
        connect_timeout_s=60.0,
        reconnect_ms=50,
        reconnect_max_ms=500,
    )
    return BridgeClient(cfg).connect()


class _Log:
    def __init__(self, path: str):
        self.f = open(path, "a", buffering=1)  # noqa: SIM115 - line-buffered for the live reader

    def __call__(self, kind: str, **fields) -> None:
        self.f.write(json.dumps({"kind": kind, "t": time.monotonic_ns(), **fields}) + "\n")


def pilot(args) -> None:
    log = _Log(args.out)
    c = _client(args, "pilot")
    c.acquire_lease()
    c.subscribe()
    end = time.monotonic() + args.seconds
    centre = direction = None
    while time.monotonic() < end:
        try:
            o = c.observe(timeout=0.5)
            if centre is None:
                centre, direction = float(o.joint_pos[0]), 1.0
            if abs(float(o.joint_pos[0]) - centre) > SWING:
                direction = -np.sign(float(o.joint_pos[0]) - centre)
            rows = np.zeros((4, 7), np.float32)
            rows[:, 0] = ROW * direction
            seq = c.send_chunk(rows, "joint_delta", RATE_HZ, obs=o)
            log("sent", seq=seq, obs_seq=o.seq, obs_stamp=o.stamp_ns)
        except (LinkLost, BridgeError) as e:  # BridgeTimeout is a BridgeError
            log("link", error=type(e).__name__, message=str(e)[:200])
            time.sleep(0.05)
        for e in c.take_errors():
            log("refused", seq=e.ref_seq, code=e.code, message=e.message[:200])
    log("done")
    c.close()


def observer(args) -> None:
    log = _Log(args.out)
    c = _client(args, "observer")
    c.subscribe()
    log("status", state=c.status().state, counters=c.status().counters, message="start")
    end = time.monotonic() + args.seconds
    seen = None
    next_poll = 0.0
    while time.monotonic() < end:
        try:
            o = c.observe(timeout=0.5)
            log(
                "obs",
                seq=o.seq,
                stamp=o.stamp_ns,
                tcp=[round(float(x), 6) for x in o.ee_pose[:3]],
                q0=round(float(o.joint_pos[0]), 6),
                chunk=o.chunk_seq,
                active=o.chunk_active,
                applied=int(o.chunk_report.get("applied", 0)),
            )
        except (LinkLost, BridgeError) as e:
            log("link", error=type(e).__name__, message=str(e)[:200])
        s = c.last_status
        if s is not None and s is not seen:
            seen = s
            log("status", state=s.state, counters=s.counters, message=s.message)
        if time.monotonic() >= next_poll:  # the counters, twice a second
            try:
                s = c.status()
                log("status", state=s.state, counters=s.counters, message="poll", holder=s.lease_holder)
            except (LinkLost, BridgeError) as e:
                log("link", error=type(e).__name__, message=str(e)[:200])
            next_poll = time.monotonic() + 0.5
    log("done")
    c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=("pilot", "observer"))
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--keys", required=True, help="directory with <role>.key_secret and robot.key")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    args = ap.parse_args()
    {"pilot": pilot, "observer": observer}[args.role](args)


if __name__ == "__main__":
    main()
