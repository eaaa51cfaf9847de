"""Versioned calibration records: ids, validity, bounds, the doctor's warnings."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from calibration.store import CalibrationInvalid, CalibrationRecord, CalibrationStore, status_lines
from rlinf_robot.errors import ConfigError


def _record(kind="handeye", residuals=None, created="2030-01-01T00:00:00Z", data_hash="abcdef0123", **kw):
    residuals = residuals if residuals is not None else {"translation_rms_mm": 0.4, "rotation_rms_deg": 0.05}
    return CalibrationRecord(
        kind=kind,
        robot_serial="fr3-1",
        camera_serial="cam-7",
        method="opencv-park",
        residuals=residuals,
        data_hash=data_hash,
        payload={"transform": [[1.0]]},
        created=created,
        **kw,
    )


def test_record_has_a_versioned_id_and_round_trips(tmp_path):
    rec = _record()
    assert rec.id == "handeye-20300101T000000Z-abcdef01"
    assert rec.valid_days == 30 and rec.bounds == {"translation_rms_mm": 2.0, "rotation_rms_deg": 0.2}
    store = CalibrationStore(tmp_path)
    path = store.save(rec)
    assert path == tmp_path / "handeye" / f"{rec.id}.json"
    assert store.get(rec.id) == rec
    with pytest.raises(ConfigError, match="never overwritten"):
        store.save(rec)
    newer = _record(created="2030-01-05T00:00:00Z", data_hash="123456789a")
    store.save(newer)
    assert [r.id for r in store.list("handeye")] == [rec.id, newer.id]
    assert store.latest("handeye").id == newer.id
    assert store.latest("handeye", robot_serial="other") is None


def test_age_and_residual_bounds_make_a_record_invalid():
    rec = _record(created="2030-01-01T00:00:00Z")
    soon = datetime(2030, 1, 10, tzinfo=timezone.utc)
    assert rec.problems(soon) == []
    late = soon + timedelta(days=40)
    assert any("days old" in p for p in rec.problems(late))
    bad = _record(residuals={"translation_rms_mm": 3.5, "rotation_rms_deg": 0.05})
    assert any("translation_rms_mm" in p and "exceeds" in p for p in bad.problems(soon))
    missing = _record(residuals={"translation_rms_mm": 0.5})
    assert any("no residual 'rotation_rms_deg'" in p for p in missing.problems(soon))


def test_require_refuses_without_a_valid_calibration_unless_forced(tmp_path):
    store = CalibrationStore(tmp_path)
    now = datetime(2030, 1, 2, tzinfo=timezone.utc)
    with pytest.raises(CalibrationInvalid, match="no handeye calibration"):
        store.require(("handeye",), now=now)
    assert store.require(("handeye",), force=True, now=now) == {"handeye": None}
    rec = _record()
    store.save(rec)
    assert store.require(("handeye",), robot_serial="fr3-1", now=now) == {"handeye": rec.id}
    with pytest.raises(CalibrationInvalid, match="days old"):
        store.require(("handeye",), now=now + timedelta(days=60))


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "lidar"},
        {"data_hash": "not-hex!"},
        {"residuals": {"rms_px": -1.0}},
        {"valid_days": -3},
        {"residuals": {"rms_px": float("nan")}},
    ],
)
def test_bad_records_are_refused_with_the_key(bad):
    kw = {"kind": "intrinsics", "residuals": {"rms_px": 0.1}} | bad
    with pytest.raises(ConfigError, match="calibration"):
        _record(**kw)


def test_unknown_keys_and_newer_schemas_are_refused():
    text = _record().to_json()
    raw = json.loads(text)
    with pytest.raises(ConfigError, match="unknown key"):
        CalibrationRecord.from_json(json.dumps(raw | {"surprise": 1}))
    with pytest.raises(ConfigError, match="schema"):
        CalibrationRecord.from_json(json.dumps(raw | {"schema": 99}))


def test_doctor_warns_about_stale_out_of_bound_and_missing_calibrations(tmp_path, capsys):
    from rlinf_robot.cli import main

    store = CalibrationStore(tmp_path)
    store.save(_record(created="2001-01-01T00:00:00Z"))  # long expired
    store.save(
        _record(
            kind="intrinsics",
            residuals={"rms_px": 3.0},
            created=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
    )
    (tmp_path / "sysid").mkdir()
    (tmp_path / "sysid" / "sysid-20300101T000000Z-abcd.json").write_text("{not json")
    lines = {label: (ok, detail) for ok, label, detail in status_lines(store)}
    assert lines["calib handeye"][0] is False and "days old" in lines["calib handeye"][1]
    assert lines["calib intrinsics"][0] is False and "rms_px" in lines["calib intrinsics"][1]
    assert lines["calib sysid"][0] is False and "none" in lines["calib sysid"][1]
    assert lines["calib files"][0] is False
    main(["doctor", "--calibration-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "WARN     calib handeye" in out and "exceeds" in out
