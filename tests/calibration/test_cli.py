"""``rlinf-robot calibrate intrinsics|handeye|sysid``: progress lines, a PNG report, a store record."""

from __future__ import annotations

import json

import pytest

from calibration.store import CalibrationStore
from rlinf_robot.cli import main


def test_calibrate_intrinsics_on_rendered_views(tmp_path, capsys):
    rc = main(
        [
            "calibrate",
            "intrinsics",
            "--sim",
            "--views",
            "8",
            "--out",
            str(tmp_path / "out"),
            "--store",
            str(tmp_path / "store"),
            "--camera-serial",
            "cam-1",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "[8/8]" in out and "ground truth f=" in out and "record valid" in out
    assert (tmp_path / "out" / "intrinsics.png").stat().st_size > 10_000
    result = json.loads((tmp_path / "out" / "intrinsics.json").read_text())
    record = CalibrationStore(tmp_path / "store").latest("intrinsics", camera_serial="cam-1")
    assert record is not None and record.payload["camera_matrix"] == result["camera_matrix"]


def test_calibrate_handeye_on_rendered_views(tmp_path, capsys):
    rc = main(
        [
            "calibrate",
            "handeye",
            "--sim",
            "--mode",
            "eye_in_hand",
            "--poses",
            "8",
            "--out",
            str(tmp_path / "out"),
            "--store",
            str(tmp_path / "store"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "pose plan: 8 safe poses" in out and "best" in out and "ground truth:" in out
    assert (tmp_path / "out" / "handeye_eye_in_hand.png").exists()
    assert CalibrationStore(tmp_path / "store").latest("handeye") is not None


def test_calibrate_without_a_data_source_is_a_clear_error(tmp_path, capsys):
    rc = main(["calibrate", "intrinsics", "--out", str(tmp_path)])
    assert rc == 1 and "--images DIR or --sim" in capsys.readouterr().out


@pytest.mark.integration
@pytest.mark.slow
def test_calibrate_sysid_from_a_recording(real_arm, tmp_path, capsys):
    real_arm.fit.save(tmp_path / "run.npz")
    rc = main(
        [
            "calibrate",
            "sysid",
            "--recordings",
            str(tmp_path / "run.npz"),
            "--max-evals",
            "1",
            "--out",
            str(tmp_path / "out"),
            "--store",
            str(tmp_path / "store"),
            "--robot-serial",
            "fr3-x",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "regression estimate" in out and "residual after fit" in out
    assert (tmp_path / "out" / "sysid.png").stat().st_size > 10_000
    record = CalibrationStore(tmp_path / "store").latest("sysid", robot_serial="fr3-x")
    assert record.problems() == [] and record.payload["dynamics_fit"]["fit_id"] == record.id
