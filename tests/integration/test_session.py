"""``rlinf-robot session`` on the embedded default with tiny budgets: every stage runs for real
(rendered-ChArUco intrinsics and eye-to-hand calibration of the front camera the task sees its goal
through, sysid through franky on franka-sim serving the session's arm, PPO in the calibrated sim and
on the nominal sim, hybrid fine-tuning on the arm through ROS 2 and
the bridge, every policy on the arm), and a ``--resume`` runs nothing twice. A stale record stops a
session with the reason before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from rlinf_robot.orchestrator.config import compose

TINY = [
    "session.calibrate_views=8",
    "session.calibrate_poses=8",
    "session.sysid_duration_s=2.0",
    "session.sysid_max_evals=1",
    "session.sim_wall_s=12",
    "session.hybrid_wall_s=30",
    "eval.sim_episodes=8",
    "eval.arm_episodes=1",  # each stage on the arm once: what is checked is that every stage ran there
    "sim.num_envs=8",
    "run.progress=false",
    "run.wandb=disabled",
]


def _stale(kind: str, serial: str):
    from calibration.store import CalibrationRecord

    created = (datetime.now(timezone.utc) - timedelta(days=400)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return CalibrationRecord(
        kind=kind,
        robot_serial=serial,
        camera_serial="sim-camera",
        method="test",
        residuals={},
        data_hash="ab" * 8,
        payload={},
        created=created,
        valid_days=30.0,
    )


def test_a_stale_calibration_stops_the_session_with_the_reason(tmp_path):
    from calibration.store import CalibrationInvalid, CalibrationStore
    from rlinf_robot.orchestrator.session import Session

    store = CalibrationStore(tmp_path / "store")
    rec = _stale("intrinsics", "fr3-test")
    store.save(rec)
    cfg = compose(
        [f"run.dir={tmp_path}", f"calibration.store={store.root}", "session.robot_serial=fr3-test"],
        config_name="session",
    )
    session = Session(cfg, say=lambda m: None)
    with pytest.raises(CalibrationInvalid, match=rf"{rec.id} is [0-9.]+ days old.*session.recalibrate"):
        session.run()
    assert session.state.done == {}  # nothing ran, nothing recorded as done
    assert not (session.dir / "sim").exists()


def test_session_stages_are_checked_by_name():
    from rlinf_robot.errors import ConfigError

    with pytest.raises(ConfigError, match=r"session.stages: unknown \['simulate'\]"):
        compose(["session.stages=[sysid,simulate]"], config_name="session")


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_whole_session_runs_every_stage_on_the_embedded_default(tmp_path):
    store = tmp_path / "store"
    # a valid hand-eye record of the wrist camera: this session calibrates the front one, so it is
    # not reused but redone (the sim would otherwise place the wrong camera)
    wrist = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", "calibrate", "handeye", "--sim", "--poses", "8"]
        + ["--mode", "eye_in_hand", "--store", str(store), "--out", str(tmp_path / "wrist")]
        + ["--robot-serial", "fr3-sim", "--camera-serial", "sim-camera"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert wrist.returncode == 0, wrist.stdout[-3000:] + wrist.stderr[-2000:]
    wrist_id = next(store.glob("handeye/*.json")).stem
    cmd = [sys.executable, "-m", "rlinf_robot.cli", "session", f"run.dir={tmp_path}", "run.id=s"]
    out = subprocess.run(
        [*cmd, f"calibration.store={store}", *TINY], capture_output=True, text=True, timeout=2200
    )
    text = out.stdout
    assert out.returncode == 0, text[-6000:] + out.stderr[-3000:]
    session = tmp_path / "s"
    done = json.loads((session / "session.json").read_text())["done"]
    assert list(done) == ["calibrate", "sysid", "sim", "nominal", "hybrid", "eval"]
    # the records the session made are in the store and are the ones its jobs trained with
    kinds = {p.parent.name for p in store.glob("*/*.json")}
    assert kinds == {"intrinsics", "handeye", "sysid"}
    sysid = done["sysid"]
    assert 0 < sysid["residual_rms_rad"] < sysid["residual_rms_before_rad"]
    hybrid_manifest = json.loads((session / "hybrid" / "manifest.json").read_text())
    assert sysid["id"] in hybrid_manifest["calibration_ids"]
    assert set(done["calibrate"]["ids"].values()) <= set(hybrid_manifest["calibration_ids"])
    nominal_manifest = json.loads((session / "nominal" / "manifest.json").read_text())
    assert nominal_manifest["calibration_ids"] == []
    # the sim stage's camera is placed by the hand-eye record, which names the intrinsics it used
    ids = done["calibrate"]["ids"]
    handeye = json.loads(next(store.glob(f"handeye/{ids['handeye']}.json")).read_text())
    assert handeye["payload"]["intrinsics_id"] == ids["intrinsics"]
    assert handeye["payload"]["mode"] == "eye_to_hand" and ids["handeye"] != wrist_id
    assert f"{wrist_id} calibrated eye_in_hand, this session needs eye_to_hand" in text
    assert "training sim: front camera placed by calibration" in text
    # the hybrid stage started from the sim stage's policy and trained on the arm's episodes
    assert "starting from sim's checkpoint" in text
    rows = [json.loads(x) for x in (session / "hybrid" / "metrics.jsonl").read_text().splitlines()]
    assert not [r for r in rows if r["phase"] == "pretrain"]
    assert rows[-1]["real:arm0/episodes"] >= 1
    # every trained stage's policy on the arm, the same number of episodes each
    arm = done["eval"]["arm"]
    assert sorted(arm) == ["hybrid", "nominal", "sim"] and all(r["n"] == 1 for r in arm.values())
    report = (session / "report.html").read_text()
    assert report.count("data:image/png;base64,") == 2 and "calibrated sim + arm (hybrid)" in report
    # a resume finds every stage done and runs none of them again
    again = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", "session", "--resume", str(session)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert again.stdout.count("done earlier, skipped") == 6
    assert json.loads((session / "session.json").read_text())["done"] == done
