"""10,000 random and malformed multipart messages from a raw ZeroMQ socket: the server stays up,
answers every one with an ``Error``, and applies nothing."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
import zmq

from rlinf_robot.protocol import Error, decode

pack = msgspec.msgpack.encode
N_MESSAGES = 10_000
BATCH = 25  # in flight at once: well below the per-peer send queue (send_hwm 64)


def chunk_header(**over):
    h = {
        "type": "action_chunk",
        "v": 1,
        "seq": 1,
        "obs_seq": 1,
        "control_mode": "joint_delta",
        "rate_hz": 10.0,
        "actions": {"dtype": "<f4", "shape": [2, 7], "frame": 1},
    }
    h.update(over)
    return h


GOOD = np.full((2, 7), 0.01, np.float32).tobytes()


def pick(rng: np.random.Generator, options: list):
    return options[int(rng.integers(0, len(options)))]


def malformed(rng: np.random.Generator, i: int) -> list[bytes]:
    """One bad message; cycles through the kinds of damage so each kind is covered many times."""
    kind = i % 12
    rand = lambda n: rng.integers(0, 256, n, dtype=np.uint8).tobytes()  # noqa: E731
    if kind == 0:  # random bytes, random frame count
        return [rand(int(rng.integers(0, 300))) for _ in range(int(rng.integers(1, 5)))]
    if kind == 1:  # msgpack that is not a map, or a map without a type
        return [pack(pick(rng, [[1, 2, 3], "text", 42, None, {"v": 1}, {"type": 7, "v": 1}]))]
    if kind == 2:  # unknown type / unknown version
        if rng.random() < 0.5:
            return [pack({"type": pick(rng, ["teleport", "chunk", ""]), "v": 1})]
        return [pack(chunk_header(v=int(rng.integers(2, 100)))), GOOD]
    if kind == 3:  # broken array reference
        ref = pick(
            rng,
            [
                {"dtype": "|O", "shape": [2, 7], "frame": 1},
                {"dtype": ">f4", "shape": [2, 7], "frame": 1},
                {"dtype": "<f4", "shape": [3, 7], "frame": 1},
                {"dtype": "<f4", "shape": [2, 7], "frame": 9},
                {"dtype": "<f4", "shape": [-2, 7], "frame": 1},
                {"dtype": "<f4", "shape": [2, 7]},
                {"dtype": "<f4", "shape": [2, 7], "frame": 0},
                [1, 2],
            ],
        )
        return [pack(chunk_header(actions=ref)), GOOD]
    if kind == 4:  # right header, wrong payload size / missing or extra frames
        return pick(
            rng,
            [
                [pack(chunk_header()), GOOD[: int(rng.integers(0, len(GOOD)))]],
                [pack(chunk_header())],
                [pack(chunk_header()), GOOD, GOOD],
            ],
        )
    if kind == 5:  # truncated header
        h = pack(chunk_header())
        return [h[: int(rng.integers(1, len(h)))], GOOD]
    if kind == 6:  # wrong field types / values
        bad = pick(
            rng,
            [
                {"seq": "x"},
                {"rate_hz": -1.0},
                {"rate_hz": 1e9},
                {"control_mode": "warp"},
                {"obs_seq": None},
                {"gripper": "yes"},
                {"hops": [1]},
                {"seq": 2**64 - 1},
                {"seq": 1.5},
            ],
        )
        return [pack(chunk_header(**bad)), GOOD]
    if kind == 7:  # commands: unknown name, bad args
        return [
            pack(
                pick(
                    rng,
                    [
                        {"type": "command", "v": 1, "seq": 1, "name": "selfdestruct"},
                        {"type": "command", "v": 1, "seq": 1, "name": "home", "args": {"a": [1]}},
                        {"type": "command", "v": 1, "name": "home"},
                    ],
                )
            )
        ]
    if kind == 8:  # a well-formed chunk, but this socket holds no lease
        return [pack(chunk_header(seq=int(rng.integers(1, 10**6)))), GOOD]
    if kind == 9:  # messages only the robot may send
        return [pack({"type": "status", "v": 1, "seq": 1, "stamp_ns": 1, "state": "ACTIVE"})]
    if kind == 10:  # oversized header
        return [pack(chunk_header(pad="x" * 70_000)), GOOD]
    # kind 11: a heartbeat claiming to be someone else
    return [pack({"type": "heartbeat", "v": 1, "seq": 1, "stamp_ns": 1, "sender": "the-holder"})]


@pytest.mark.slow
def test_ten_thousand_malformed_messages(server, make_client, arm):
    holder = make_client(server)
    holder.acquire_lease()  # a lease exists, so a stray chunk would have somewhere to go
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.routing_id = b"fuzzer"
    sock.connect(server.endpoint)
    rng = np.random.default_rng(1234)
    codes: dict[str, int] = {}
    try:
        for start in range(0, N_MESSAGES, BATCH):
            for i in range(start, start + BATCH):
                sock.send_multipart(malformed(rng, i))
            for _ in range(BATCH):
                assert sock.poll(10_000), "the server stopped answering"
                reply = decode(sock.recv_multipart())
                assert isinstance(reply, Error), reply
                codes[reply.code] = codes.get(reply.code, 0) + 1
        assert sock.poll(200) == 0  # exactly one answer per message
    finally:
        sock.close(0)
        ctx.term()
    assert sum(codes.values()) == N_MESSAGES
    assert {"malformed", "version", "refused", "too_large"} <= set(codes)
    assert arm.entries("apply") == []
    # still serving: the lease holder's round trip works
    st = holder.status()
    assert st.lease_holder == holder.client_id and st.counters["malformed"] > 5000
    obs = holder.observe(timeout=5)
    assert obs.seq > 0 and server.status().counters.get("loop_errors", 0) == 0
