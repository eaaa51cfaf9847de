"""Every kind of bad input raises ProtocolError naming what is wrong; fuzzed bytes never crash."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlinf_robot.protocol import ActionChunk, Heartbeat, ProtocolError, decode, encode

pack = msgspec.msgpack.encode


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


GOOD_PAYLOAD = np.zeros((2, 7), np.float32).tobytes()


def test_good_reference_decodes():
    assert isinstance(decode([pack(chunk_header()), GOOD_PAYLOAD]), ActionChunk)


@pytest.mark.parametrize(
    ("override", "frames_extra", "code", "field"),
    [
        ({"v": 2}, None, "version", "$.v"),
        ({"v": "one"}, None, "malformed", "$.v"),
        ({"type": "teleport"}, None, "malformed", None),
        ({"seq": "x"}, None, "malformed", "$.seq"),
        ({"control_mode": "warp"}, None, "malformed", "$.control_mode"),
        ({"actions": {"dtype": "|O", "shape": [2, 7], "frame": 1}}, None, "malformed", "$.actions"),
        ({"actions": {"dtype": ">f4", "shape": [2, 7], "frame": 1}}, None, "malformed", "$.actions"),
        ({"actions": {"dtype": "<f4", "shape": [3, 7], "frame": 1}}, None, "malformed", "$.actions"),
        ({"actions": {"dtype": "<f4", "shape": [2, 6], "frame": 1}}, b"\0" * 48, "malformed", "$.actions"),
        ({"actions": {"dtype": "<f4", "shape": [2, 7], "frame": 5}}, None, "malformed", "$.actions"),
        ({"actions": {"dtype": "<f4", "shape": [-2, -7], "frame": 1}}, None, "malformed", "$.actions"),
        ({"actions": {"dtype": "<i4", "shape": [2, 7], "frame": 1}}, None, "malformed", "$.actions"),
        ({"actions": [1, 2, 3]}, None, "malformed", "$.actions"),
        ({"rate_hz": -5.0}, None, "malformed", "$.rate_hz"),
    ],
)
def test_bad_headers_name_the_field(override, frames_extra, code, field):
    frames = [pack(chunk_header(**override)), frames_extra if frames_extra is not None else GOOD_PAYLOAD]
    with pytest.raises(ProtocolError) as info:
        decode(frames)
    assert info.value.code == code
    if field is not None:
        assert info.value.field == field, str(info.value)


def test_missing_field_named():
    h = chunk_header()
    del h["obs_seq"]
    with pytest.raises(ProtocolError) as info:
        decode([pack(h), GOOD_PAYLOAD])
    assert "obs_seq" in str(info.value) and info.value.field == "$.obs_seq"


@pytest.mark.parametrize(
    ("header", "payload"),
    [
        (chunk_header(actions={"dtype": "<f4", "shape": [2, 6], "frame": 1}), b"\0" * 48),  # wrong width
        (chunk_header(actions={"dtype": "<i4", "shape": [2, 7], "frame": 1}), GOOD_PAYLOAD),  # int dtype
        (chunk_header(actions={"dtype": "<f4", "shape": [0, 7], "frame": 1}), b""),  # H = 0
        (chunk_header(control_mode="warp"), GOOD_PAYLOAD),
        (chunk_header(rate_hz=0.0), GOOD_PAYLOAD),
        (chunk_header(v=2), GOOD_PAYLOAD),
        (chunk_header(), GOOD_PAYLOAD[:-1]),  # truncated payload
        (chunk_header(obs_seq="x"), GOOD_PAYLOAD),
        ({"type": "command", "v": 1, "seq": 42, "name": "selfdestruct"}, None),
        ({"type": "command", "v": 1, "seq": 42, "name": "home", "args": {"a": [1]}}, None),
        ({"type": "teleport", "v": 1, "seq": 42}, None),
        ({"type": "heartbeat", "v": 1, "seq": 42}, None),  # stamp_ns missing
    ],
)
def test_an_error_carries_the_seq_whenever_it_can_be_read(header, payload):
    """A client must be able to match every refusal to its request (issue 14, item 5)."""
    header = {**header, "seq": 42}
    with pytest.raises(ProtocolError) as info:
        decode([pack(header)] + ([] if payload is None else [payload]))
    assert info.value.ref_seq == 42, str(info.value)


@pytest.mark.parametrize(
    "frames",
    [
        [pack(chunk_header(seq="x")), GOOD_PAYLOAD],  # not an integer
        [pack({k: v for k, v in chunk_header().items() if k != "seq"}), GOOD_PAYLOAD],
        [pack([1, 2, 3])],  # not a map
        [pack(chunk_header())[:-3], GOOD_PAYLOAD],  # the header itself is cut off
        [pack(chunk_header(pad="x" * 70_000)), GOOD_PAYLOAD],  # oversized header: never parsed
    ],
)
def test_no_seq_is_made_up(frames):
    with pytest.raises(ProtocolError) as info:
        decode(frames)
    assert info.value.ref_seq == -1


def test_truncated_header_and_payload():
    frames = encode(Heartbeat(seq=1, stamp_ns=2))
    with pytest.raises(ProtocolError):
        decode([frames[0][:-3]])
    with pytest.raises(ProtocolError, match="bytes"):
        decode([pack(chunk_header()), GOOD_PAYLOAD[:-1]])


def test_extra_unreferenced_frame_rejected():
    with pytest.raises(ProtocolError, match="not referenced"):
        decode([pack(chunk_header()), GOOD_PAYLOAD, b"junk"])


def test_frame_referenced_twice_rejected():
    h = {
        "type": "observation",
        "v": 1,
        "seq": 1,
        "stamp_ns": 1,
        "joint_pos": {"dtype": "<f8", "shape": [7], "frame": 1},
        "joint_vel": {"dtype": "<f8", "shape": [7], "frame": 1},
        "ee_pose": {"dtype": "<f8", "shape": [7], "frame": 2},
    }
    with pytest.raises(ProtocolError, match="twice"):
        decode([pack(h), np.zeros(7).tobytes(), np.zeros(7).tobytes()])


def test_oversized_refused():
    with pytest.raises(ProtocolError) as info:
        decode([pack(chunk_header()), GOOD_PAYLOAD], max_bytes=50)
    assert info.value.code == "too_large"
    with pytest.raises(ProtocolError, match="header"):
        decode([b"\x00" * (64 * 1024 + 1)])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=4))
def test_fuzzed_bytes_only_raise_protocol_error(frames):
    try:
        decode(frames)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_valid_messages_only_raise_protocol_error(data):
    frames = [
        bytes(f)
        for f in encode(
            ActionChunk(
                seq=1, obs_seq=1, control_mode="ee_delta", rate_hz=5, actions=np.ones((4, 6), np.float32)
            )
        )
    ]
    header = bytearray(frames[0])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(header) - 1))
        header[i] = data.draw(st.integers(0, 255))
    try:
        decode([bytes(header), *frames[1:]])
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=8,
    ),
    st.sampled_from(["observation", "action_chunk", "heartbeat", "command", "status", "error"]),
)
def test_random_structured_headers_only_raise_protocol_error(body, msg_type):
    header = {"type": msg_type, "v": 1, "payload": body}
    if isinstance(body, dict):
        header.update(body)
        header["type"], header["v"] = msg_type, 1
    try:
        decode([pack(header)])
    except ProtocolError:
        pass
