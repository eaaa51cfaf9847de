"""Soak: the hybrid job with the arm (franka-sim behind the ROS 2 nodes and the bridge) for a long
time, watched from the side: memory, latency drift, dropped chunks and faults.

It runs ``rlinf-robot train``'s default hybrid job (sim pre-training, then sim and real rollouts in
one loop) for ``--minutes`` and samples every ``--every`` seconds:

- resident memory (RSS, MB) of three groups of processes: the driver, its Ray processes (the
  raylet's descendants and Ray's own services) and the robot PC (``robot up`` and its children);
- the bridge's status seen by an observer client (no lease): its decision counters (chunks
  accepted, dropped as stale / late / old, refused by the safety filter, ...) and its span
  percentiles; the arm worker's step latency p50 (the newest 2,000 steps) and its episode counts.

Then per ``--window`` minutes: the arm worker's step-latency p50 (median of the samples) and the
bridge's obs -> action p99 (max of the samples); over the run: memory growth after the first
window (MB per hour, least squares), counter deltas, aborted episodes and link losses. The last
line compares the last window's step-latency p50 with the first window's (drift):

    RESULT soak ours=<last window p50 ms> peer=<first window p50 ms> ratio=<ours/peer> goal=<=1.5

Not part of ``make test``. 10 minutes by default; the hour the docs name is ``--minutes 60``.

    python benchmarks/soak.py [--minutes 10] [--window 5] [--every 10] [--json soak.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("WANDB_MODE", "offline")

import numpy as np  # noqa: E402


def _rss_mb(procs) -> float:
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except Exception:  # gone between listing and reading
            pass
    return total / 2**20


def _groups(robot_pid: int | None) -> dict[str, list]:
    """driver / ray / robot_pc processes, found from the process tree."""
    import psutil

    me = psutil.Process()
    robot = []
    if robot_pid is not None:
        try:
            root = psutil.Process(robot_pid)
            robot = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    robot_pids = {p.pid for p in robot}
    ray = [p for p in me.children(recursive=True) if p.pid not in robot_pids]
    # Ray's GCS, raylet and workers may be re-parented away from the driver: take them by name too
    seen = {p.pid for p in ray} | robot_pids | {me.pid}
    for p in psutil.process_iter(["name", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if p.pid not in seen and ("ray::" in cmd or "raylet" in cmd or "gcs_server" in cmd):
            ray.append(p)
    return {"driver": [me], "ray": ray, "robot_pc": robot}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--window", type=float, default=5.0, help="minutes per latency window")
    ap.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--pretrain", type=float, default=60.0, help="sim pre-training, s")
    ap.add_argument("--json", default="", help="also write every sample here")
    args = ap.parse_args()

    from rlinf_robot.bridge import BridgeClient
    from rlinf_robot.orchestrator.config import compose
    from rlinf_robot.orchestrator.job import TrainJob

    runs = Path(tempfile.mkdtemp(prefix="soak-"))
    cfg = compose(
        [
            f"budget.wall_s={args.minutes * 60:.0f}",
            f"budget.pretrain_wall_s={args.pretrain:.0f}",
            "eval.sim_episodes=16",
            "eval.arm_episodes=0",
            "eval.baseline_arm_episodes=0",
            f"run.dir={runs}",
            "run.id=soak",
            "run.progress=false",
            "run.report=false",
        ]
    )
    job = TrainJob(cfg)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("r", job.run()), daemon=True)
    t0 = time.monotonic()
    thread.start()
    print(
        f"soak: the hybrid job for {args.minutes:g} min (+{args.pretrain:g} s pre-training) in {runs}",
        flush=True,
    )
    samples: list[dict] = []
    observer = None
    try:
        while thread.is_alive():
            time.sleep(args.every)
            robot = getattr(job, "robot", None)
            if robot is None or not robot.ready() or job.state.phase != "train":
                continue  # the loop on the arm has not begun
            if observer is None:
                observer = BridgeClient(endpoint=job.endpoints[0], connect_timeout_s=30.0).connect()
            s: dict = {"t_s": time.monotonic() - t0}
            groups = _groups(robot.proc.pid)
            s.update({f"rss_mb/{k}": _rss_mb(v) for k, v in groups.items()})
            try:
                st = observer.status()
                s["bridge/state"] = st.state
                s.update({f"bridge/{k}": v for k, v in st.counters.items()})
                s["bridge/obs_to_action_p99_ms"] = st.latency_ms.get("obs_to_action", {}).get(
                    "p99", float("nan")
                )
            except Exception as e:  # the link may be cut by the job's own faults: note it, go on
                s["bridge/error"] = f"{type(e).__name__}: {e}"
            try:
                for stat in job.groups["real"].call("stats").wait(60):
                    s["arm/latency_p50_ms"] = stat["latency_p50_ms"]
                    s["arm/episodes"] = stat["episodes"]
                    s["arm/aborted"] = stat["aborted"]
                    s["arm/reconnects"] = stat["reconnects"]
            except Exception as e:
                s["arm/error"] = f"{type(e).__name__}: {e}"
            samples.append(s)
            print(
                f"[{s['t_s']:7.0f} s] rss driver {s['rss_mb/driver']:.0f} ray {s['rss_mb/ray']:.0f} "
                f"robot pc {s['rss_mb/robot_pc']:.0f} MB | arm step p50 {s.get('arm/latency_p50_ms', float('nan')):.1f} ms, "
                f"episodes {s.get('arm/episodes', '-')} (aborted {s.get('arm/aborted', '-')}) | bridge {s.get('bridge/state', '-')}",
                flush=True,
            )
        thread.join()
    finally:
        if observer is not None:
            observer.close()
    res = result.get("r")
    if args.json:
        Path(args.json).write_text(json.dumps(samples, indent=1, default=str))
    if len(samples) < 2:
        print(f"soak: too few samples ({len(samples)}) - did the job reach the arm? run dir {runs}")
        return 1
    start = samples[0]["t_s"]
    window_s = args.window * 60
    windows: dict[int, list[dict]] = {}
    for s in samples:
        windows.setdefault(int((s["t_s"] - start) // window_s), []).append(s)
    print(f"\n{'window':>8} {'samples':>7} {'arm step p50 ms':>16} {'bridge obs->action p99 ms':>26}")
    p50s = []
    for w, ss in sorted(windows.items()):
        p50 = float(np.nanmedian([s.get("arm/latency_p50_ms", np.nan) for s in ss]))
        p99 = float(np.nanmax([s.get("bridge/obs_to_action_p99_ms", np.nan) for s in ss] + [np.nan]))
        p50s.append(p50)
        print(f"{w * args.window:>6g}-{(w + 1) * args.window:g} {len(ss):>7} {p50:>16.2f} {p99:>26.2f}")
    settled = [s for s in samples if s["t_s"] - start >= min(window_s, (samples[-1]["t_s"] - start) / 2)]
    print("\nmemory (RSS), MB at the first sample -> the last, growth after the first window (MB/h):")
    for group in ("driver", "ray", "robot_pc"):
        t = np.array([s["t_s"] for s in settled]) / 3600.0
        m = np.array([s[f"rss_mb/{group}"] for s in settled])
        slope = float(np.polyfit(t, m, 1)[0]) if len(settled) >= 2 and np.ptp(t) > 0 else float("nan")
        print(
            f"  {group:9s} {samples[0][f'rss_mb/{group}']:8.0f} -> {samples[-1][f'rss_mb/{group}']:8.0f}   {slope:+8.1f} MB/h"
        )
    first, last = samples[0], samples[-1]
    counters = sorted(k for k in last if k.startswith("bridge/") and isinstance(last[k], int))
    print(
        "bridge counters over the run: "
        + ", ".join(f"{k[7:]} +{last[k] - first.get(k, 0)}" for k in counters)
    )
    print(
        f"arm: {last.get('arm/episodes', 0)} episodes, {last.get('arm/aborted', 0)} aborted, "
        f"{last.get('arm/reconnects', 0)} link losses; job {'interrupted' if res and res.interrupted else 'finished'}"
    )
    ours, peer = p50s[-1], p50s[0]
    print(f"RESULT soak ours={ours:.2f} peer={peer:.2f} ratio={ours / peer:.2f} goal=<=1.5")
    return 0


if __name__ == "__main__":
    sys.exit(main())
