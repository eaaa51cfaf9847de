"""Bad input at the robot's entry points (issue 19, item 3), shared by ``tests/faults/test_bad_input.py``
(a few hundred cases per entry point, in ``make test``) and ``benchmarks/fuzz_inputs.py`` (10,000
each). Every case is drawn by ``hypothesis`` from a fixed seed, so a run is the same every time.

Each entry point is a *checker*: one case in, the outcome's name out ("decoded", "error:malformed",
...), or an ``AssertionError`` saying how the answer broke the entry point's contract. An exception
of any other type is a crash. :func:`run_cases` draws ``n`` cases and tallies them: a case is
*clean* when its checker returned.

- ``protocol``: ``rlinf_robot.protocol.decode`` on random frames, mutated valid messages of every
  type and random headers: a message, or ``ProtocolError`` with a documented code, the ``ref_seq``
  of the header's integer ``seq`` and a ``$.``-path ``field``; what decodes encodes again.
- ``wire``: a real ``BridgeServer`` on 127.0.0.1 over a ``KinematicArm``, driven through a raw
  DEALER (``tests/bridge/wire.py``). Phase "intruder": another client holds the lease and the case
  comes from a client without it; phase "holder": the case comes from the lease holder itself and
  is a chunk that must never run (NaN/inf, an observation never published, a start time long past).
  Each case is answered exactly as ``docs/protocol.md`` says (one ``error`` with the code the local
  decoder or the documented rules predict, ``status`` for a command, a heartbeat for a heartbeat,
  nothing for a client's ``error``), the refusals are counted, and the arm never moves.
- ``ros``: ``/franka/joint_command`` and ``/franka/ee_command`` through Fast DDS to a real
  ``franka_node`` on franka-sim (``tests/faults/ros_inputs.py``): each case refused with a reason its
  defects name and counted, or taken when it has none; the arm never leaves ACTIVE, its limits or
  the workspace box, and franka-sim raises no reflex.
- ``config``: ``orchestrator.config.compose`` on random ``key=value`` overrides and ``from_yaml`` on
  mutated saved configs: a ``TrainConfig``, or one ``ConfigError`` whose message names the key.
- ``calibration``: ``calibration.store`` on mutated record files: ``get`` returns a valid record or
  raises ``ConfigError`` / ``CalibrationInvalid``; ``list``, ``latest``, ``require`` and
  ``status_lines`` (what ``rlinf-robot doctor`` shows) never raise on a bad file.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

SEED = 19_003
ERROR_CODES = {
    "malformed",
    "version",
    "too_large",
    "refused",
    "latched",
    "busy",
    "fault",
    "unsafe",
    "no_state",
    "failed",
    "old_seq",
    "unknown_obs",
    "stale_obs",
    "late",
    "dropped",
}
DECODE_CODES = {"malformed", "version", "too_large"}
pack = msgspec.msgpack.encode


@dataclass
class Tally:
    name: str
    ran: int = 0
    clean: int = 0
    outcomes: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)  # the first few, with the case
    seconds: float = 0.0
    crashes: int = 0  # cases that raised something other than AssertionError (a broken contract)

    def line(self) -> str:
        top = ", ".join(f"{k} {v}" for k, v in self.outcomes.most_common(6))
        return (
            f"{self.name:12s} {self.clean:6d}/{self.ran:<6d} clean in {self.seconds:6.1f} s"
            f"  ({top}{', ...' if len(self.outcomes) > 6 else ''})"
        )


def run_cases(
    name: str,
    strategy: st.SearchStrategy,
    check: Callable[[Any], str],
    n: int,
    seed: int = SEED,
    keep: int = 5,
) -> Tally:
    """Draw ``n`` cases from ``strategy`` (seeded; generation only, no shrinking, no example
    database) and run ``check`` on each; never raises for a failing case, it is tallied."""
    tally = Tally(name)

    @hypothesis_seed(seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        derandomize=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def one(case):
        tally.ran += 1
        try:
            outcome = check(case)
        except Exception as exc:  # a crash, or the contract broken (AssertionError)
            tally.outcomes["FAILED"] += 1
            tally.crashes += not isinstance(exc, AssertionError)
            if len(tally.failures) < keep:
                what = (
                    "" if isinstance(exc, AssertionError) else "".join(traceback.format_exception(exc)[-3:])
                )
                tally.failures.append(f"{type(exc).__name__}: {exc}\n  case: {_short(case)}\n{what}")
            return
        tally.clean += 1
        tally.outcomes[outcome] += 1

    t0 = time.monotonic()
    one()
    tally.seconds = time.monotonic() - t0
    return tally


def _short(case: Any, limit: int = 400) -> str:
    text = repr(case)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


# ====================================================================== values
def nasty_scalars(binary: bool = True) -> st.SearchStrategy:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.sampled_from([0, -1, 1, 2**31, 2**63 - 1, 2**64 - 1, -(2**63)]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0]),
        st.text(max_size=12),
        *([st.binary(max_size=12)] if binary else []),
    )


def nasty_values(binary: bool = True) -> st.SearchStrategy:
    """Nested lists and maps of nasty scalars (``binary=False``: only what JSON and YAML can hold)."""
    return st.recursive(
        nasty_scalars(binary),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=6,
    )


# ====================================================================== protocol
def _valid_messages() -> list[list[bytes]]:
    from rlinf_robot.protocol import ActionChunk, Command, Error, Heartbeat, Observation, Status, encode

    msgs = [
        ActionChunk(
            seq=7,
            obs_seq=3,
            control_mode="joint_delta",
            rate_hz=10.0,
            actions=np.full((2, 7), 0.01, np.float32),
        ),
        ActionChunk(
            seq=8,
            obs_seq=3,
            control_mode="ee_target",
            rate_hz=20.0,
            gripper=True,
            actions=np.tile(np.array([0.5, 0, 0.4, 1, 0, 0, 0, 0.04]), (3, 1)),
        ),
        Heartbeat(seq=9, stamp_ns=123, sender="fuzz"),
        Command(seq=10, name="status"),
        Status(seq=11, stamp_ns=5, state="ACTIVE", counters={"a": 1}, latency_ms={"x": {"p50": 1.0}}),
        Error(code="malformed", message="m", field="$.x", ref_seq=3),
        Observation(
            seq=13,
            stamp_ns=9,
            joint_pos=np.zeros(7),
            joint_vel=np.zeros(7),
            ee_pose=np.zeros(7),
            images={"front": np.zeros((4, 5, 3), np.uint8)},
            instruction="reach",
        ),
    ]
    return [[bytes(f) for f in encode(m)] for m in msgs]


_VALID = None


def valid_messages() -> list[list[bytes]]:
    global _VALID
    if _VALID is None:
        _VALID = _valid_messages()
    return _VALID


@st.composite
def mutated_frames(draw) -> list[bytes]:
    """A valid message of some type, damaged a few times: bytes flipped, inserted, deleted, a frame
    cut short, dropped, duplicated, swapped or added."""
    frames = [bytearray(f) for f in draw(st.sampled_from(valid_messages()))]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "drop", "dup", "swap", "extra"]))
        i = draw(st.integers(0, len(frames) - 1))
        f = frames[i]
        if kind == "flip" and f:
            f[draw(st.integers(0, len(f) - 1))] = draw(st.integers(0, 255))
        elif kind == "insert":
            at = draw(st.integers(0, len(f)))
            f[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and f:
            at = draw(st.integers(0, len(f) - 1))
            del f[at : at + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del f[draw(st.integers(0, len(f))) :]
        elif kind == "drop" and len(frames) > 1:
            frames.pop(i)
        elif kind == "dup":
            frames.insert(i, bytearray(f))
        elif kind == "swap" and len(frames) > 1:
            j = draw(st.integers(0, len(frames) - 1))
            frames[i], frames[j] = frames[j], frames[i]
        elif kind == "extra":
            frames.append(bytearray(draw(st.binary(max_size=64))))
    return [bytes(f) for f in frames]


_HEADER_KEYS = [
    "type",
    "v",
    "seq",
    "obs_seq",
    "control_mode",
    "rate_hz",
    "actions",
    "gripper",
    "hops",
    "align",
    "first_action_time_ns",
    "policy_version",
    "stamp_ns",
    "sender",
    "name",
    "args",
    "code",
    "state",
    "joint_pos",
    "images",
    "ref_seq",
]


@st.composite
def structured_frames(draw) -> list[bytes]:
    """A msgpack header map near a valid one: keys removed, replaced by nasty values or added, and
    the payload frames of a valid message (or random ones) behind it."""
    base = draw(st.sampled_from(valid_messages()))
    header = msgspec.msgpack.decode(base[0])
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(_HEADER_KEYS) | st.text(max_size=6))
        if draw(st.booleans()) and key in header:
            del header[key]
        else:
            header[key] = draw(
                nasty_values()
                | st.fixed_dictionaries(
                    {
                        "dtype": st.sampled_from(["<f4", "<f8", ">f4", "|O", "<i4", "|u1", "x"])
                        | nasty_scalars(),
                        "shape": st.lists(st.integers(-3, 9), max_size=3) | nasty_scalars(),
                        "frame": st.integers(-2, 4) | nasty_scalars(),
                    }
                )
            )
    tail = draw(st.just(base[1:]) | st.lists(st.binary(max_size=80), max_size=3))
    return [pack(header), *tail]


def protocol_cases() -> st.SearchStrategy:
    return st.one_of(
        st.lists(st.binary(max_size=300), min_size=0, max_size=5),  # random frames (also none at all)
        mutated_frames(),
        mutated_frames(),
        structured_frames(),
        structured_frames(),
    )


def check_decode(frames: list[bytes]) -> str:
    from rlinf_robot.protocol import ProtocolError, decode, encode

    try:
        msg = decode(frames)
    except ProtocolError as e:
        assert e.code in DECODE_CODES, f"undocumented decode error code {e.code!r}"
        assert type(e.ref_seq) is int, f"ref_seq {e.ref_seq!r}"
        assert e.field is None or e.field.startswith("$"), f"field {e.field!r}"
        assert str(e), "an empty error message"
        return f"error:{e.code}"
    again = decode(encode(msg))  # what decodes is a message the encoder can send again
    assert type(again) is type(msg), (type(again), type(msg))
    return f"decoded:{type(msg).__name__}"


# ====================================================================== the bridge, over the wire
class WireHarness:
    """A real BridgeServer on 127.0.0.1 (port picked by the OS) over a KinematicArm, a lease holder
    and a raw fuzzing client; :meth:`close` stops everything."""

    SENTINEL = 4_611_686_018_427_000_000  # seqs of the status commands that close each case

    def __init__(self, phase: str):
        from rlinf_robot.bridge import BridgeClient, BridgeServer, KinematicArm, ServerConfig
        from tests.bridge.wire import WireClient

        assert phase in ("intruder", "holder")
        self.phase = phase
        self.arm = KinematicArm(images={"front": np.zeros((8, 8, 3), np.uint8)}, instruction="reach")
        self.server = BridgeServer(
            self.arm,
            ServerConfig(
                endpoint="tcp://127.0.0.1:*", obs_rate_hz=50.0, deadman_ms=2000.0, lease_timeout_ms=10_000.0
            ),
        ).start()
        self.holder = None
        self.fuzz = None
        try:
            if phase == "intruder":
                self.holder = BridgeClient(
                    endpoint=self.server.endpoint, connect_timeout_s=5.0, link_timeout_ms=5000.0
                ).connect()
                self.holder.acquire_lease()
                self.fuzz = WireClient(self.server.endpoint, "fuzzer")
            else:
                self.fuzz = WireClient(self.server.endpoint, "fuzzer", heartbeat_s=0.05)
                assert self.fuzz.command("acquire_lease")["type"] == "status"
                assert self.fuzz.command("subscribe")["type"] == "status"
                self.obs_seq = self.fuzz.observation(timeout=10)["seq"]
        except BaseException:
            self.close()
            raise
        self.n = 0
        self.expected_refusals = Counter()

    def close(self) -> None:
        for c in (self.fuzz, self.holder):
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass
        self.server.stop()

    # -------------------------------------------------------------- one case
    def exchange(self, frames: list[bytes]) -> list[dict]:
        """Send ``frames``, then a ``status`` command; the answers that came before its status."""
        self.n += 1
        sentinel = self.SENTINEL + self.n
        self.fuzz.send_frames(frames)
        self.fuzz.send({"type": "command", "name": "status", "seq": sentinel})
        self.fuzz.wait(
            lambda m: m["type"] == "status" and m.get("ref_seq") == sentinel,
            10.0,
            "the status closing the case (the server stopped answering?)",
        )
        obs = [m["seq"] for m in self.fuzz.inbox if m["type"] == "observation"]
        if obs and self.phase == "holder":
            self.obs_seq = max(self.obs_seq, *obs)
        answers = [
            m
            for m in self.fuzz.inbox
            if m["type"] != "observation" and not (m["type"] == "heartbeat" and self.phase == "holder")
        ]  # (from its #hb thread)
        self.fuzz.inbox.clear()
        return answers

    def check(self, frames: list[bytes]) -> str:
        from rlinf_robot.protocol import ActionChunk, Command, Error, Heartbeat, ProtocolError, decode

        assert self.server._thread is not None and self.server._thread.is_alive(), "the bridge loop died"
        if self.phase == "holder":
            frames = self._on_latest_observation(frames)
        try:
            msg = decode(frames)
            expect = None
        except ProtocolError as e:
            msg, expect = None, ("error", e.code, e.ref_seq)
        if msg is not None:
            seq = getattr(msg, "seq", -1)
            if isinstance(msg, ActionChunk):
                expect = (
                    ("error", "refused", seq) if self.phase == "intruder" else ("error", _doomed(msg), seq)
                )
            elif isinstance(msg, Heartbeat):
                ok = msg.sender in ("", "fuzzer")
                expect = ("heartbeat",) if ok else ("error", "refused", seq)
            elif isinstance(msg, Command):
                expect = ("command", msg.name, seq)
            elif isinstance(msg, Error):
                expect = ("nothing",)
            else:  # status / observation from a client
                expect = ("error", "refused", seq)
        answers = self.exchange(frames)
        if expect[0] == "nothing":
            assert answers == [], f"a client's error was answered: {answers}"
            return "ignored"
        assert len(answers) == 1, f"expected one answer ({expect}), got {len(answers)}: {answers}"
        a = answers[0]
        if expect[0] == "heartbeat":
            assert a["type"] == "heartbeat", a
            return "heartbeat"
        if expect[0] == "command":
            assert a.get("ref_seq") == expect[2], a
            if a["type"] == "error":
                assert a["code"] in ERROR_CODES, a
                return f"command:{a['code']}"
            assert a["type"] == "status", a
            return "command:status"
        _, code, ref_seq = expect
        assert a["type"] == "error" and a["code"] == code and a["ref_seq"] == ref_seq, (
            f"expected error {code} for seq {ref_seq}, got {a}"
        )
        assert a["code"] in ERROR_CODES
        self.expected_refusals[code] += 1
        return f"error:{code}"

    def _on_latest_observation(self, frames: list[bytes]) -> list[bytes]:
        """A doomed chunk with ``obs_seq`` 1 means "the newest observation" (so only its start time
        dooms it): filled in here, from what the holder received."""
        header = msgspec.msgpack.decode(frames[0])
        if header.get("obs_seq") != 1:
            return frames
        self.fuzz.pump(0)
        seqs = [m["seq"] for m in self.fuzz.inbox if m["type"] == "observation"]
        self.obs_seq = max([self.obs_seq, *seqs])
        return [pack({**header, "obs_seq": self.obs_seq}), *frames[1:]]

    def verify(self) -> list[str]:
        """After the cases: nothing moved, the loop never failed, the refusals were counted, and the
        holder still has a working session."""
        problems = []
        applied = self.arm.entries("apply")
        if applied:
            problems.append(f"the arm was commanded {len(applied)} time(s) by bad input")
        counters = self.server.status().counters
        if counters.get("loop_errors", 0):
            problems.append(f"loop_errors = {counters['loop_errors']}")
        if counters.get("chunks_accepted", 0):
            problems.append(f"chunks_accepted = {counters['chunks_accepted']}")
        decoding = self.expected_refusals["malformed"] + self.expected_refusals["too_large"]
        if counters.get("malformed", 0) < decoding:
            problems.append(f"malformed counter {counters.get('malformed', 0)} < {decoding} refused")
        if counters.get("bad_version", 0) < self.expected_refusals["version"]:
            problems.append("bad_version not counted")
        if self.phase == "intruder":
            st_ = self.holder.status()
            if st_.lease_holder != self.holder.client_id:
                problems.append(f"the holder lost its lease to {st_.lease_holder!r}")
        else:
            rejected = counters.get("chunks_rejected_non_finite", 0)
            if rejected < self.expected_refusals["unsafe"]:
                problems.append(f"chunks_rejected_non_finite {rejected} < {self.expected_refusals['unsafe']}")
        return problems


def _doomed(msg) -> str:
    """The code a holder's chunk built by :func:`doomed_chunks` must get (the first check it fails)."""
    if not np.all(np.isfinite(msg.actions)):
        return "unsafe"
    if msg.obs_seq < 0 or msg.obs_seq > 10**9:
        return "unknown_obs"
    return "late"


def wire_cases(phase: str) -> st.SearchStrategy:
    bad = st.one_of(
        st.lists(st.binary(max_size=200), min_size=1, max_size=4), mutated_frames(), structured_frames()
    )
    if phase == "intruder":
        return st.one_of(bad, well_formed_from_intruder())
    return doomed_chunks()


_MODES = {"joint_position": 7, "joint_delta": 7, "ee_target": 7, "ee_delta": 6}
_SAFE_CMDS = ["status", "unsubscribe", "acquire_lease", "release_lease", "home", "reset", "recover"]


@st.composite
def well_formed_from_intruder(draw) -> list[bytes]:
    """Messages that decode but come from a client without the lease: chunks (any values),
    commands that only the holder may give, heartbeats with someone else's name, robot-only types."""
    from rlinf_robot.protocol import ActionChunk, Command, Heartbeat, Status, encode

    kind = draw(st.sampled_from(["chunk", "command", "heartbeat", "status"]))
    seq = draw(st.integers(-(2**63), 2**63 - 1))
    if kind == "chunk":
        mode = draw(st.sampled_from(sorted(_MODES)))
        h = draw(st.integers(1, 4))
        actions = draw(
            st.lists(
                st.floats(width=32) | st.sampled_from([1e30, -1e30]),
                min_size=h * _MODES[mode],
                max_size=h * _MODES[mode],
            )
        )
        msg = ActionChunk(
            seq=seq,
            obs_seq=draw(st.integers(-5, 10**6)),
            control_mode=mode,
            rate_hz=draw(st.floats(0.5, 2000)),
            actions=np.array(actions, np.float32).reshape(h, -1),
        )
    elif kind == "command":  # not "stop" (anyone may latch the e-stop) nor "subscribe" (observations)
        msg = Command(
            seq=seq,
            name=draw(st.sampled_from(_SAFE_CMDS)),
            args=draw(
                st.dictionaries(
                    st.text(max_size=4), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=4), max_size=2
                )
            ),
        )
    elif kind == "heartbeat":
        msg = Heartbeat(
            seq=seq,
            stamp_ns=draw(st.integers(0, 2**63 - 1)),
            sender=draw(
                st.sampled_from(["", "fuzzer", "holder", "fuzzer#hb", "x" * 300]) | st.text(max_size=8)
            ),
        )
    else:
        msg = Status(seq=seq, stamp_ns=1, state="ACTIVE")
    return [bytes(f) for f in encode(msg)]


@st.composite
def doomed_chunks(draw) -> list[bytes]:
    """Well-formed chunks from the lease holder that must never run: a NaN/inf value, an observation
    never published (negative or far ahead), or a start time long past."""
    from rlinf_robot.protocol import ActionChunk, encode

    mode = draw(st.sampled_from(sorted(_MODES)))
    grip = draw(st.booleans())
    width = _MODES[mode] + grip
    h = draw(st.integers(1, 5))
    values = np.array(
        draw(st.lists(st.floats(-0.01, 0.01), min_size=h * width, max_size=h * width)), np.float64
    )
    why = draw(st.sampled_from(["nan", "unknown_obs", "late"]))
    obs_seq = 1
    first = 0
    if why == "nan":
        values[draw(st.integers(0, values.size - 1))] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    elif why == "unknown_obs":
        obs_seq = draw(st.integers(-(2**63), -1) | st.integers(10**9 + 1, 2**63 - 1))
    else:
        first = draw(st.integers(1, 10**6))  # robot-clock ns: long before the server started
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    msg = ActionChunk(
        seq=draw(st.integers(1, 2**62)),
        obs_seq=obs_seq,
        control_mode=mode,
        rate_hz=draw(st.floats(1.0, 1000.0)),
        gripper=grip,
        first_action_time_ns=first,
        actions=values.reshape(h, width).astype(dtype),
    )
    return [bytes(f) for f in encode(msg)]


# ====================================================================== the training config
_CONFIG_KEYS = [
    "mode",
    "seed",
    "task.name",
    "task.action_mode",
    "task.control_hz",
    "task.terminate_on_success",
    "sim.num_envs",
    "sim.num_shards",
    "sim.stages",
    "sim.transport",
    "robot.kind",
    "robot.endpoints",
    "robot.ready_timeout_s",
    "policy.name",
    "hybrid.real_fraction",
    "hybrid.max_staleness",
    "hybrid.max_real_uses",
    "warm_start.demos",
    "warm_start.epochs",
    "warm_start.noise",
    "warm_start.log_std",
    "budget.wall_s",
    "budget.updates",
    "budget.pretrain_target",
    "eval.sim_episodes",
    "run.checkpoint_every",
    "run.wandb",
    "run.id",
    "run.learner_nice",
    "algorithm.name",
    "sim",
    "policy",
    "algorithm",
    "cluster",
    "task",
]


def _key() -> st.SearchStrategy:
    known = st.sampled_from(_CONFIG_KEYS)
    typo = st.builds(lambda k, s: k + s, known, st.sampled_from(["x", "_", "s", ".extra", "2"]))
    return st.one_of(
        known, known, typo, st.from_regex(r"[a-z][a-z_]{0,8}(\.[a-z][a-z_]{0,8}){0,2}", fullmatch=True)
    )


def _override_value() -> st.SearchStrategy:
    return st.one_of(
        st.sampled_from(
            [
                "null",
                "true",
                "false",
                "nan",
                "inf",
                "-inf",
                "-1",
                "0",
                "1e400",
                "abc",
                "[]",
                "{}",
                "[1,2]",
                "{a: 1}",
                "''",
                "hybrid",
                "sim_only",
                "ppo",
                "mujoco",
                "remote",
                "none",
            ]
        ),
        st.integers(-(10**12), 10**12).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.from_regex(r"[A-Za-z0-9_.\-]{1,10}", fullmatch=True),
    )


@st.composite
def config_overrides(draw) -> list[str]:
    """1-3 ``key=value`` overrides, each sometimes with Hydra's ``+`` (add) or ``++`` (force)."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        prefix = draw(st.sampled_from(["", "", "", "+", "++"]))
        out.append(f"{prefix}{draw(_key())}={draw(_override_value())}")
    return out


def _key_named(message: str, overrides: list[str]) -> bool:
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        leaf = key.rsplit(".", 1)[-1]
        if key and (key in message or (leaf and leaf in message)):
            return True
    return False


def check_compose(overrides: list[str]) -> str:
    from rlinf_robot.errors import ConfigError
    from rlinf_robot.orchestrator.config import TrainConfig, compose

    try:
        cfg = compose(overrides)
    except ConfigError as e:
        message = str(e)
        assert "\n" not in message.strip(), f"a multi-line message: {message!r}"
        assert _key_named(message, overrides), f"the message names none of the keys: {message!r}"
        return "config_error"
    assert isinstance(cfg, TrainConfig)
    for o in overrides:  # a key that was accepted is a key of the schema (no silently ignored typo)
        key = o.split("=", 1)[0].lstrip("+")
        assert _has_key(cfg, key), f"{o!r} was accepted, but {key!r} is no key of TrainConfig"
    return "accepted"


def _has_key(cfg, dotted: str) -> bool:
    node: Any = cfg
    for part in dotted.split("."):
        if isinstance(node, dict):
            if part not in node:
                return isinstance(node, dict)  # free-form dicts (task.options, algorithm, ...) take any key
            node = node[part]
        elif hasattr(node, "__dataclass_fields__"):
            if part not in node.__dataclass_fields__:
                return False
            node = getattr(node, part)
        else:
            return False
    return True


_SAVED_CONFIG: str | None = None


def saved_config() -> str:
    global _SAVED_CONFIG
    if _SAVED_CONFIG is None:
        from rlinf_robot.orchestrator.config import compose, to_yaml

        _SAVED_CONFIG = to_yaml(compose([]))
    return _SAVED_CONFIG


@st.composite
def saved_config_files(draw) -> tuple[str, list[str]]:
    """A run's saved config.yaml with 1-3 keys changed to nasty values, removed or added (returned
    with the dotted keys touched), or its text damaged."""
    import yaml

    raw = yaml.safe_load(saved_config())
    keys = []
    if draw(st.integers(0, 9)) == 0:  # damaged text: cut off or a byte changed
        text = saved_config()
        at = draw(st.integers(0, len(text) - 1))
        return (
            text[:at]
            + draw(st.sampled_from(["", ":", "\t", "- ", "{", "'", "\x00", "\n  x"]))
            + text[at + 1 :],
            [],
        )
    for _ in range(draw(st.integers(1, 3))):
        dotted = draw(_key())
        parts = dotted.split(".")
        node = raw
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        if draw(st.integers(0, 4)) == 0:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = draw(nasty_values(binary=False))
        keys.append(dotted)
    try:
        text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        text = json.dumps(raw, default=str)
    return (text, keys)


def check_from_yaml(case: tuple[str, list[str]]) -> str:
    from rlinf_robot.errors import ConfigError
    from rlinf_robot.orchestrator.config import TrainConfig, from_yaml

    text, keys = case
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            cfg = from_yaml(path)
        except ConfigError as e:
            message = str(e)
            assert "\n" not in message.strip(), f"a multi-line message: {message!r}"
            assert (
                not keys
                or _key_named(message, [k + "=" for k in keys])
                or "yaml" in message.lower()
                or str(path) in message
            ), f"the message names none of {keys}: {message!r}"
            return "config_error"
    assert isinstance(cfg, TrainConfig)
    return "accepted"


def config_cases() -> st.SearchStrategy:
    return st.one_of(
        config_overrides().map(lambda o: ("compose", o)), saved_config_files().map(lambda c: ("from_yaml", c))
    )


def check_config(case) -> str:
    kind, payload = case
    return (check_compose if kind == "compose" else check_from_yaml)(payload) + f":{kind}"


# ====================================================================== the calibration store
def _valid_record_json() -> str:
    from calibration.store import CalibrationRecord

    return CalibrationRecord(
        kind="handeye",
        robot_serial="fr3-1",
        camera_serial="cam-7",
        method="opencv-park",
        residuals={"translation_rms_mm": 0.4, "rotation_rms_deg": 0.05},
        data_hash="abcdef0123",
        payload={"transform": [[1.0, 0.0], [0.0, 1.0]]},
        created="2030-01-01T00:00:00Z",
    ).to_json()


_RECORD_KEYS = [
    "kind",
    "robot_serial",
    "camera_serial",
    "method",
    "residuals",
    "data_hash",
    "payload",
    "created",
    "valid_days",
    "bounds",
    "id",
    "notes",
    "schema",
]


@st.composite
def record_files(draw) -> bytes:
    """A valid record file with fields changed to nasty values, removed or added, or its bytes
    damaged (cut off, flipped, not UTF-8, not JSON)."""
    text = _valid_record_json()
    kind = draw(st.sampled_from(["fields", "fields", "fields", "bytes", "json"]))
    if kind == "bytes":
        data = bytearray(text.encode())
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(data) - 1))
            if draw(st.booleans()):
                data[at] = draw(st.integers(0, 255))
            else:
                del data[at:]
                if not data:
                    break
        return bytes(data)
    if kind == "json":
        return json.dumps(draw(nasty_values(binary=False))).encode()
    raw = json.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(_RECORD_KEYS) | st.text(max_size=6))
        if draw(st.integers(0, 3)) == 0:
            raw.pop(key, None)
        else:
            value = draw(
                nasty_values(binary=False)
                | st.sampled_from(
                    [
                        "handeye",
                        "sysid",
                        "2031-02-03T04:05:06Z",
                        "2030-13-45T99:00:00Z",
                        "abc",
                        "ffff",
                        "handeye-20300101T000000Z-abcdef01",
                        {"translation_rms_mm": "x"},
                        {"rotation_rms_deg": -1},
                    ]
                )
            )
            raw[key] = value
    return json.dumps(raw, allow_nan=True).encode()


def check_record(data: bytes) -> str:
    from datetime import datetime, timezone

    from calibration.store import CalibrationInvalid, CalibrationRecord, CalibrationStore, status_lines
    from rlinf_robot.errors import ConfigError

    now = datetime(2030, 1, 10, tzinfo=timezone.utc)
    with tempfile.TemporaryDirectory() as d:
        store = CalibrationStore(d)
        rid = "handeye-20300101T000000Z-abcdef01"
        path = Path(d) / "handeye" / f"{rid}.json"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        try:
            rec = store.get(rid)
        except (ConfigError, CalibrationInvalid) as e:
            assert str(e).strip(), "an empty message"
            outcome = "refused"
        else:
            assert isinstance(rec, CalibrationRecord)
            rec.problems(now)  # a record get() returns can be checked
            rec.age_days(now)
            CalibrationRecord.from_json(rec.to_json())
            outcome = "valid"
        listed = store.list("handeye")  # never raises: a bad file is skipped ...
        assert (outcome == "valid") == bool(listed), f"get() says {outcome}, list() has {len(listed)}"
        try:
            store.require(("handeye",), now=now)
        except CalibrationInvalid:
            pass
        lines = status_lines(store, now)  # ... and reported by doctor
        if outcome == "refused":
            assert any(label == "calib files" and not ok for ok, label, _ in lines), lines
        return outcome


# ====================================================================== all of them
def run_protocol(n: int, seed: int = SEED) -> Tally:
    return run_cases("protocol", protocol_cases(), check_decode, n, seed)


def run_wire(n: int, seed: int = SEED) -> Tally:
    """``n`` cases over the wire: three quarters from a client without the lease, a quarter from the
    holder; the end-of-run checks (nothing moved, refusals counted) fail the last case if broken."""
    total = Tally("wire")
    for phase, share in (("intruder", 0.75), ("holder", 0.25)):
        harness = WireHarness(phase)
        try:
            t = run_cases(f"wire:{phase}", wire_cases(phase), harness.check, max(1, round(n * share)), seed)
            problems = harness.verify()
        finally:
            harness.close()
        if problems:  # the whole phase is not clean
            t.failures += problems
            t.outcomes["FAILED"] += t.clean
            t.clean = 0
        total.ran += t.ran
        total.clean += t.clean
        total.seconds += t.seconds
        total.outcomes.update({f"{phase}:{k}": v for k, v in t.outcomes.items()})
        total.failures += t.failures
        total.crashes += t.crashes
    return total


def run_config(n: int, seed: int = SEED) -> Tally:
    return run_cases("config", config_cases(), check_config, n, seed)


def run_calibration(n: int, seed: int = SEED) -> Tally:
    return run_cases("calibration", record_files(), check_record, n, seed)


def run_ros(n: int, seed: int = SEED) -> Tally:
    """The ROS command topics against ``robot up --sim`` (``tests/faults/ros_inputs.py``)."""
    from tests.faults.ros_inputs import run_ros as run

    return run(n, seed)


RUNNERS = {
    "protocol": run_protocol,
    "wire": run_wire,
    "ros": run_ros,
    "config": run_config,
    "calibration": run_calibration,
}
