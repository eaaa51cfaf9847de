"""Issue 19, item 3 (reduced: a few hundred seeded cases per entry point; the 10,000-case runs are
``benchmarks/fuzz_inputs.py``). The cases and their oracles are in ``tests/faults/inputs.py``."""

from __future__ import annotations

import json

import msgspec
import pytest

from calibration.store import CalibrationStore, status_lines
from rlinf_robot.errors import ConfigError
from rlinf_robot.protocol import ProtocolError, decode
from tests.faults import inputs

N = 300


def _assert_clean(t: inputs.Tally, n: int) -> None:
    assert t.ran >= 0.9 * n, t.line()
    assert t.clean == t.ran, t.line() + "\n" + "\n".join(t.failures)


def test_protocol_decoder_on_random_and_mutated_frames():
    _assert_clean(inputs.run_protocol(N), N)


@pytest.mark.slow
def test_bridge_server_over_the_wire_answers_every_bad_message_and_never_moves():
    _assert_clean(inputs.run_wire(N), N)


def test_calibration_store_on_corrupted_records():
    _assert_clean(inputs.run_calibration(N), N)


@pytest.mark.slow
def test_config_loader_raises_only_config_error():
    """compose / from_yaml never raise anything but ConfigError (Hydra's slow compose: 100 cases)."""
    t = inputs.run_config(100)
    assert t.ran >= 90 and t.crashes == 0, t.line() + "\n" + "\n".join(t.failures)


def test_config_errors_name_the_key():
    for overrides in (["mode=null"], ["+no_such_key=1"]):
        inputs.check_compose(overrides)


# ---------------------------------------------------------------- the defects the fuzzing found
def test_a_non_string_map_key_names_the_map_not_a_garbled_path():
    """Before: field was 'key` in `$' (msgspec's text cut at the wrong place)."""
    with pytest.raises(ProtocolError) as info:
        decode([msgspec.msgpack.encode({1: "heartbeat", "type": "heartbeat", "v": 1})])
    assert info.value.field == "$"


GOOD = json.loads(inputs._valid_record_json())
RID = GOOD["id"]


@pytest.mark.parametrize(
    "edit",
    [
        {"kind": None},  # before: TypeError (missing argument) from get(), list(), doctor
        {"residuals": [1, 2]},  # AttributeError
        {"valid_days": "handeye"},  # ValueError
        {"created": "2030-13-45T99:00:00Z"},  # ValueError, at require() time
        {"schema": "1"},  # TypeError comparing str > int
        {"data_hash": 7},  # TypeError in re
        {"bounds": {"translation_rms_mm": "x"}},  # ValueError formatting it in problems()
        {"id": "sysid-20300101T000000Z-abcdef01"},  # another record's id in this file
    ],
    ids=lambda e: next(iter(e)),
)
def test_a_corrupted_record_is_one_clear_config_error(tmp_path, edit):
    raw = {**GOOD, **edit}
    if raw["kind"] is None:
        del raw["kind"]
    path = tmp_path / "handeye" / f"{RID}.json"
    path.parent.mkdir()
    path.write_text(json.dumps(raw))
    store = CalibrationStore(tmp_path)
    with pytest.raises(ConfigError, match=str(path.name)):
        store.get(RID)
    assert store.list() == []
    assert any(label == "calib files" and not ok for ok, label, _ in status_lines(store))


def test_a_record_file_that_is_not_utf8_is_a_config_error(tmp_path):
    path = tmp_path / "handeye" / f"{RID}.json"
    path.parent.mkdir()
    path.write_bytes(b'{"kind": "\xff\xfe"}')
    with pytest.raises(ConfigError, match="UTF-8"):
        CalibrationStore(tmp_path).get(RID)
