"""Bridge round trip vs openpi's remote-inference path, on loopback, in the same run.

Payload (both sides): an observation of two 224x224x3 uint8 images + 8 state floats -> an action
chunk of 16x8 float32.

- ours: ``BridgeServer`` (robot role, this process) publishes observations; a ``BridgeClient`` in a
  subprocess (learner role) answers each with a chunk. Round trip = server's ``obs_sent`` stamp
  (taken before encoding) -> ``action_received`` (the chunk's arrival).
- peer: openpi-client's ``WebsocketClientPolicy.infer`` (robot role, this process) against a minimal
  server in a subprocess doing what openpi's websocket policy server does: metadata on connect,
  msgpack-numpy (``openpi_client.msgpack_numpy``) in and out.

Rounds alternate between the two (noise on this shared machine hits both alike). Then throughput:
observations/s delivered to 4 observer clients at once.

Last line: RESULT bridge_rtt_p50 ours=<ms> peer=<ms> ratio=<ours/peer> goal=<=0.5
(the issue's goals: p50 <= 0.5x openpi's and p99 <= 3 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np

H, D = 16, 8
IMG = (224, 224, 3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, __file__, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )


def _ask(proc: subprocess.Popen, line: str, timeout: float = 120.0) -> str:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = proc.stdout.readline()
        if out:
            return out.strip()
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited with {proc.returncode}")
    raise TimeoutError(line)


# ---------------------------------------------------------------------- subprocess roles
def role_learner(endpoint: str) -> None:
    """Answer every observation with a chunk; commands on stdin: ``run N`` / ``quit``."""
    from rlinf_robot.bridge import BridgeClient

    actions = np.zeros((H, D), np.float32)
    actions[:, -1] = 0.04
    with BridgeClient(endpoint=endpoint) as client:
        client.acquire_lease()
        print("ready", flush=True)
        for line in sys.stdin:
            cmd = line.split()
            if cmd[0] == "quit":
                break
            client.subscribe()
            for _ in range(int(cmd[1])):
                obs = client.observe(timeout=5.0)
                client.send_chunk(actions, "joint_delta", 50.0, obs=obs, gripper=True)
            client.command("unsubscribe")
            print("done", flush=True)


def role_observer(endpoint: str, seconds: float) -> None:
    from rlinf_robot.bridge import BridgeClient

    with BridgeClient(endpoint=endpoint) as client:
        client.subscribe()
        print("ready", flush=True)
        sys.stdin.readline()  # go
        n, t0 = 0, time.monotonic()
        first = client.observe(timeout=5.0).seq
        while time.monotonic() - t0 < seconds:
            last = client.observe(timeout=5.0).seq
            n += 1
        dt = time.monotonic() - t0
        print(json.dumps({"received": n, "seconds": dt, "seq_span": last - first}), flush=True)


def role_openpi_server(port: int) -> None:
    """What openpi's WebsocketPolicyServer does, minus the policy: metadata, then infer in a loop."""
    import asyncio

    from openpi_client import msgpack_numpy
    from websockets.asyncio.server import serve

    packer = msgpack_numpy.Packer()
    actions = np.zeros((H, D), np.float32)

    async def handler(ws):
        await ws.send(packer.pack({"policy": "bench", "action_horizon": H}))
        async for data in ws:
            obs = msgpack_numpy.unpackb(data)
            assert obs["observation/image"].shape == IMG
            await ws.send(packer.pack({"actions": actions}))

    async def main():
        async with serve(handler, "127.0.0.1", port, compression=None, max_size=None):
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    asyncio.run(main())


# ---------------------------------------------------------------------- main
SPANS_HOPS = ("obs_captured", "obs_sent", "obs_received", "action_sent")


def _time_ms(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e3


def percentiles(x: np.ndarray) -> dict[str, float]:
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)), "max": float(x.max())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--throughput-seconds", type=float, default=3.0)
    ap.add_argument("--role", default="main")
    ap.add_argument("--endpoint", default="")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument(
        "--nice",
        type=int,
        default=-10,
        help="nice value for this run and its subprocesses (both paths alike; needs privilege): "
        "keeps other tenants of a shared machine from dominating the tails",
    )
    args = ap.parse_args()
    if args.role == "main" and args.nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, args.nice)  # inherited by every subprocess below
        except OSError as e:
            print(f"(running at the default priority: {e})")
    if args.role == "learner":
        return role_learner(args.endpoint) or 0
    if args.role == "observer":
        return role_observer(args.endpoint, args.throughput_seconds) or 0
    if args.role == "openpi_server":
        return role_openpi_server(args.port) or 0

    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    from rlinf_robot.bridge import BridgeServer, KinematicArm, ServerConfig
    from rlinf_robot.protocol import ActionChunk, decode, encode

    rng = np.random.default_rng(0)
    images = {f"cam{i}": rng.integers(0, 255, IMG, dtype=np.uint8) for i in range(2)}
    arm = KinematicArm(images=images)
    per_round = args.iterations // args.rounds
    ours, theirs, hops_p50 = [], [], []
    port = _free_port()
    peer_server = _spawn("--role", "openpi_server", "--port", str(port))
    with BridgeServer(arm, ServerConfig(endpoint="tcp://127.0.0.1:*", obs_rate_hz=500.0)) as server:
        learner = _spawn("--role", "learner", "--endpoint", server.endpoint)
        try:
            assert learner.stdout.readline().strip() == "ready"
            assert peer_server.stdout.readline().strip() == "ready"
            policy = WebsocketClientPolicy("127.0.0.1", port)
            obs = {
                "observation/image": images["cam0"],
                "observation/wrist_image": images["cam1"],
                "observation/state": np.zeros(8, np.float32),
            }
            for _ in range(100):  # warm-up both paths
                policy.infer(obs)
            _ask(learner, "run 100")
            for _ in range(args.rounds):
                server.latency.clear()
                assert _ask(learner, f"run {per_round}") == "done"
                ours.append(server.latency.spans["obs_to_action"].samples())
                hops_p50.append({k: v["p50"] for k, v in server.latency.summary().items()})
                t = np.empty(per_round)
                for i in range(per_round):
                    t0 = time.perf_counter()
                    out = policy.infer(obs)
                    t[i] = (time.perf_counter() - t0) * 1e3
                assert out["actions"].shape == (H, D)
                theirs.append(t)
        finally:
            for p in (learner, peer_server):
                try:
                    p.stdin.write("quit\n")
                    p.stdin.close()
                except (BrokenPipeError, OSError):
                    pass
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
    # The server stamps action_received before decoding the chunk; openpi's timing includes the
    # client decoding the reply. Add our decode time (median, measured here) to every sample.
    chunk_frames = [
        bytes(f)
        for f in encode(
            ActionChunk(
                seq=1,
                obs_seq=1,
                control_mode="joint_delta",
                rate_hz=50.0,
                actions=np.zeros((H, D), np.float32),
                gripper=True,
                hops={k: 1 for k in SPANS_HOPS},
            )
        )
    ]
    decode_ms = float(np.median([_time_ms(decode, chunk_frames) for _ in range(2000)]))
    ours_ms, theirs_ms = np.concatenate(ours) + decode_ms, np.concatenate(theirs)
    o, t = percentiles(ours_ms), percentiles(theirs_ms)
    print(
        f"payload: 2 x {IMG} uint8 + 8 x f32 -> {H}x{D} f32; {len(ours_ms)} vs {len(theirs_ms)} round trips,"
        f" {args.rounds} alternating rounds; ours includes {decode_ms * 1e3:.0f} us of chunk decoding"
    )
    print(f"ours   (zmq bridge)          p50 {o['p50']:.3f} ms  p99 {o['p99']:.3f} ms  max {o['max']:.3f} ms")
    print(f"openpi (websocket+msgpack)   p50 {t['p50']:.3f} ms  p99 {t['p99']:.3f} ms  max {t['max']:.3f} ms")
    spans = sorted({k for h in hops_p50 for k in h})
    print("ours per hop, p50 ms (median over rounds): " + ", ".join(
        f"{k} {np.median([h[k] for h in hops_p50 if k in h]):.3f}" for k in spans))
    print(
        f"ratio p50 {o['p50'] / t['p50']:.3f} (goal <= 0.5); ours p99 {o['p99']:.3f} ms (goal <= 3 ms): "
        f"{'met' if o['p99'] <= 3.0 else 'NOT met'}"
    )

    # Throughput: 4 observers, server publishing as fast as it is allowed to.
    with BridgeServer(arm, ServerConfig(endpoint="tcp://127.0.0.1:*", obs_rate_hz=2000.0)) as server:
        observers = [
            _spawn(
                "--role",
                "observer",
                "--endpoint",
                server.endpoint,
                "--throughput-seconds",
                str(args.throughput_seconds),
            )
            for _ in range(4)
        ]
        try:
            for p in observers:
                assert p.stdout.readline().strip() == "ready"
            results = [json.loads(_ask(p, "go", timeout=60)) for p in observers]
        finally:
            for p in observers:
                p.wait(10)
        published = server.status().counters.get("obs_published", 0)
    rates = [r["received"] / r["seconds"] for r in results]
    mb = np.prod(IMG) * 2 / 1e6
    print(
        f"throughput, 4 observers: {sum(rates):.0f} obs/s total ({', '.join(f'{r:.0f}' for r in rates)} each;"
        f" {sum(rates) * mb:.0f} MB/s of images); server published {published} in total"
        f" (cpus: {os.cpu_count()})"
    )
    print(
        f"RESULT bridge_rtt_p50 ours={o['p50']:.3f}ms peer={t['p50']:.3f}ms ratio={o['p50'] / t['p50']:.3f} goal=<=0.5"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
