"""The learner-job config: Hydra composition, overrides, and one clear error for a bad key or value."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rlinf_robot.errors import ConfigError
from rlinf_robot.orchestrator.config import compose, from_yaml, to_yaml
from tests.support.hybrid_run import free_port


def test_the_default_is_the_hybrid_job_on_the_embedded_default():
    cfg = compose()
    assert cfg.mode == "hybrid" and cfg.robot.kind == "sim_local" and cfg.algorithm["name"] == "ppo"
    assert cfg.sim_env == "mujoco/fr3-reach" and cfg.task.action_mode == "ee_delta"
    assert cfg.cluster["placement"]["mode"] == "disaggregated"  # conf/cluster/local.yaml
    assert 0 < cfg.hybrid.real_fraction < 1


def test_overrides_as_hydra_users_expect():
    cfg = compose(["mode=sim_only", "budget.wall_s=12.5", "algorithm.lr=3e-4", "sim.num_envs=8", "seed=3"])
    assert cfg.mode == "sim_only" and cfg.robot.kind == "none" and not cfg.uses_arm
    assert cfg.budget.wall_s == 12.5 and cfg.algorithm["lr"] == pytest.approx(3e-4) and cfg.sim.num_envs == 8
    real = compose(["mode=real_only"])
    assert not real.uses_sim and real.hybrid.real_fraction == 1.0
    remote = compose(["robot=fr3", "robot.endpoints=[tcp://10.0.0.2:5555]"])
    assert remote.robot.kind == "remote" and remote.robot.endpoints == ["tcp://10.0.0.2:5555"]


@pytest.mark.parametrize(
    "override, names",
    [
        ("budget.wal_s=3", "budget.wal_s"),
        ("sim.num_envs=many", "sim.num_envs"),
        ("algorithm=sacc", "algorithm/sacc"),
        ("hybrid.real_fraction=1.5", "hybrid.real_fraction"),
        ("sim.stages=5", "sim.stages"),
        ("mode=hybrid robot=none", "robot.kind"),
        ("session.handeye_mode=eye_on_foot", "session.handeye_mode"),
        (
            "robot=fr3 robot.endpoints=[tcp://10.0.0.2:5555] +task.options.goal_camera=front",
            "robot.env.camera_poses.front",
        ),
    ],
)
def test_a_bad_key_or_value_is_one_error_naming_it(override, names):
    with pytest.raises(ConfigError) as err:
        compose(override.split())
    assert names in str(err.value) and "\n" not in str(err.value)


def test_the_saved_config_reads_back(tmp_path):
    cfg = compose(["mode=sim_only", "budget.wall_s=7"])
    path = tmp_path / "config.yaml"
    path.write_text(to_yaml(cfg))
    assert from_yaml(path) == cfg


def test_the_session_sees_its_goal_through_the_cells_front_camera(tmp_path):
    """``session.yaml``: reach with the goal seen by the front camera, eye-to-hand calibration of
    that camera, and the embedded arm's episodes measuring through the cell's camera (the one the
    ChArUco views are rendered from), saved as numbers so a run dir reads back without this code."""
    from calibration.scene import CELL_CAMERAS

    cfg = compose([], "session")
    assert cfg.task.options == {"goal_camera": "front"} and cfg.session.handeye_mode == "eye_to_hand"
    arm = cfg.real_env_options()
    np.testing.assert_allclose(arm["camera_poses"]["front"], CELL_CAMERAS["front"])
    assert arm["task_options"] == {"goal_camera": "front"}
    assert cfg.sim_make_kwargs()["task_options"] == {"goal_camera": "front"}
    saved = to_yaml(cfg)
    assert "cell_camera" not in saved
    (tmp_path / "config.yaml").write_text(saved)
    assert from_yaml(tmp_path / "config.yaml") == cfg


def test_the_cli_reports_a_bad_key_before_starting_anything():
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", "train", "budget.wal_s=3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert "budget.wal_s" in out.stdout and "Traceback" not in out.stdout + out.stderr


def test_an_unreachable_robot_is_one_error_naming_the_endpoint_before_anything_starts(tmp_path):
    endpoint = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_robot.cli",
            "train",
            "robot=fr3",
            f"robot.endpoints=[{endpoint}]",
            "robot.client.connect_timeout_s=1.0",
            f"run.dir={tmp_path / 'runs'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [x for x in out.stdout.splitlines() if x.strip()]
    assert len(lines) == 1 and endpoint in lines[0] and "not reachable" in lines[0], out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "runs").exists()  # no run dir, no Ray, no worker


def test_a_robot_whose_bridge_answers_passes_the_check(tmp_path):
    """The same check against a real BridgeServer (in-memory arm) on loopback goes through."""
    from rlinf_robot.bridge import BridgeServer, KinematicArm, ServerConfig
    from rlinf_robot.orchestrator.job import TrainJob

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    server = BridgeServer(KinematicArm(), ServerConfig(endpoint=endpoint, deadman_ms=1000.0)).start()
    try:
        cfg = compose(
            ["robot=fr3", f"robot.endpoints=[{endpoint}]", f"run.dir={tmp_path}", "run.wandb=disabled"]
        )
        job = TrainJob(cfg)
        assert job.run_dir.parent == tmp_path and job.endpoints == [endpoint]
    finally:
        server.stop()


def _sysid_record(valid_days=30.0):
    from calibration.store import CalibrationRecord

    fit = {
        "mean": {"joint_damping": [5.0] * 7},
        "std": {"joint_damping": [0.5] * 7},
        "fit_id": "",
        "residual_rms": 0.001,
    }
    return CalibrationRecord(
        kind="sysid",
        robot_serial="fr3-test",
        camera_serial="",
        method="least-squares-replay",
        residuals={"residual_rms_rad": 0.001},
        data_hash="0" * 16,
        payload={"dynamics_fit": fit},
        valid_days=valid_days,
    )


def test_a_sysid_record_sets_the_training_sim_and_its_id_goes_into_the_manifest(tmp_path):
    """``calibration.sysid=<id>`` (or ``latest``): the sim's dynamics are randomized around the
    record's fit, and the manifest names the record."""
    import json

    import sim
    from calibration.store import CalibrationStore
    from rlinf_robot.orchestrator.job import TrainJob

    store = CalibrationStore(tmp_path / "store")
    rec = _sysid_record()
    store.save(rec)
    for which in (rec.id, "latest"):
        cfg = compose(
            [
                "mode=sim_only",
                f"run.dir={tmp_path / 'runs'}",
                f"run.id=run-{which}",
                f"calibration.store={tmp_path / 'store'}",
                f"calibration.sysid={which}",
            ]
        )
        job = TrainJob(cfg)
        job._write_manifest()
        assert json.loads((job.run_dir / "manifest.json").read_text())["calibration_ids"] == [rec.id]
    env = sim.make(cfg.sim_env, num_envs=1, randomization=job.sim_randomization)
    try:
        env.reset(seed=0)
        assert env.dr.joint_damping.kind == "absolute"
        assert np.all(np.abs(env.models[0].dof_damping[env.nominal.dof_ids] - 5.0) <= 3 * 0.5 + 1e-9)
    finally:
        env.close()


def test_a_missing_or_stale_record_stops_the_job_before_it_starts(tmp_path):
    from calibration.store import CalibrationInvalid, CalibrationStore
    from rlinf_robot.orchestrator.job import TrainJob

    base = ["mode=sim_only", f"run.dir={tmp_path / 'runs'}", f"calibration.store={tmp_path / 'store'}"]
    with pytest.raises(CalibrationInvalid, match="no sysid record"):
        TrainJob(compose([*base, "calibration.sysid=latest"]))
    with pytest.raises(CalibrationInvalid, match="no handeye calibration"):
        TrainJob(compose([*base, "calibration.require=[handeye]"]))
    store = CalibrationStore(tmp_path / "store")
    old = _sysid_record(valid_days=1.0)
    old.created = "2020-01-01T00:00:00Z"
    store.save(old)
    with pytest.raises(CalibrationInvalid, match=old.id):
        TrainJob(compose([*base, f"calibration.sysid={old.id}"]))
    assert not (tmp_path / "runs").exists()  # nothing started, no run dir
    job = TrainJob(compose([*base, f"calibration.sysid={old.id}", "calibration.force=true", "run.id=forced"]))
    assert job.calibration_ids == [old.id]


@pytest.mark.parametrize("mode", ["hybrid", "sim_only", "real_only", "cotrain"])
@pytest.mark.parametrize("algorithm", ["ppo", "sac", "rlpd"])
@pytest.mark.parametrize("policy", ["mlp", "tiny_vla"])
def test_every_preset_composes_or_is_refused_with_the_reason(mode, algorithm, policy):
    """mode x algorithm x policy: each pairing composes into a recipe, or (SAC/RLPD with tiny_vla,
    RLinf-Co with SAC/RLPD) is one ConfigError saying why, before anything starts."""
    from rlinf_robot.orchestrator.recipe import make_recipe

    overrides = [f"mode={mode}", f"algorithm={algorithm}", f"policy={policy}"]
    refused = (algorithm != "ppo" and policy != "mlp") or (mode == "cotrain" and algorithm != "ppo")
    if refused:
        with pytest.raises(ConfigError, match="algorithm=ppo"):
            compose(overrides)
        return
    cfg = compose(overrides)
    recipe = make_recipe(cfg.algorithm)
    assert recipe.name == algorithm and cfg.mode == mode and cfg.policy.name == policy
    if algorithm != "ppo":
        assert cfg.policy.kwargs["squash"] is True and cfg.hybrid.real_noise_scale == 1.0
    if mode == "real_only":
        assert cfg.hybrid.real_fraction == 1.0


def test_init_from_must_name_a_run_with_a_checkpoint_of_the_same_policy(tmp_path):
    """``run.init_from`` is checked before anything starts: a dir without a checkpoint, or a run of
    another policy, is one ConfigError naming the key."""
    from rlinf_robot.errors import ConfigError
    from rlinf_robot.orchestrator.config import to_yaml
    from rlinf_robot.orchestrator.job import TrainJob

    base = ["mode=sim_only", f"run.dir={tmp_path / 'runs'}"]
    with pytest.raises(ConfigError, match="run.init_from: .* not a run dir with a checkpoint"):
        TrainJob(compose([*base, f"run.init_from={tmp_path / 'nothing'}"]))
    other = tmp_path / "other"
    (other / "checkpoints" / "update_000001").mkdir(parents=True)
    (other / "checkpoints" / "latest").write_text("update_000001")
    (other / "config.yaml").write_text(to_yaml(compose(["mode=sim_only", "policy=tiny_vla"])))
    with pytest.raises(ConfigError, match="run.init_from: .* another policy or task"):
        TrainJob(compose([*base, f"run.init_from={other}"]))
    (other / "config.yaml").write_text(to_yaml(compose(["mode=sim_only"])))
    job = TrainJob(compose([f"run.dir={tmp_path / 'runs'}", "run.id=ok", f"run.init_from={other}"]))
    assert job.cfg.mode == "hybrid" and job.cfg.pretrains  # a hybrid run that pre-trains by default
    assert job.init_checkpoint == other / "checkpoints" / "update_000001"
    assert not job._pretraining_ahead()


def test_a_hand_eye_record_places_the_training_sims_camera(tmp_path):
    """calibration.camera: the job's sim envs get the hand-eye record's camera pose and the field of
    view of the intrinsics record it names; both ids go into the manifest."""
    from calibration.scene import DEFAULT_CAM_IN_TCP, CameraSpec
    from calibration.store import CalibrationStore
    from rlinf_robot.orchestrator.job import TrainJob
    from tests.support.calibration_records import camera_records

    handeye, intrinsics = camera_records("eye_in_hand", DEFAULT_CAM_IN_TCP, CameraSpec(fovy_deg=60.0))
    store = CalibrationStore(tmp_path / "store")
    store.save(intrinsics)
    store.save(handeye)
    cfg = compose(
        [
            "mode=sim_only",
            f"run.dir={tmp_path / 'runs'}",
            f"calibration.store={tmp_path / 'store'}",
            "calibration.camera=latest",
        ]
    )
    job = TrainJob(cfg)
    assert sorted(job.calibration_ids) == sorted([intrinsics.id, handeye.id])
    placed = job.sim_cameras["wrist"]
    np.testing.assert_allclose(placed["pose"], DEFAULT_CAM_IN_TCP)
    assert placed["fovy"] == pytest.approx(60.0)


def test_the_documented_curve_keys_override_composes_into_a_client_config(tmp_path):
    """conf/robot/fr3.yaml tells a user to set robot.client.curve.* on the command line: Hydra's
    struct mode refused that ("Key 'curve' is not in struct") until keys inside free-form dicts
    became set-or-add; found by the fault matrix's hybrid-job row."""
    from rlinf_robot.bridge.config import ClientConfig, CurveClientKeys

    cfg = compose(
        [
            "robot=fr3",
            "robot.endpoints=[tcp://10.0.0.2:5555]",
            "robot.names=[arm0]",
            f"robot.client.curve.secret_file={tmp_path / 'learner.key_secret'}",
            f"robot.client.curve.server_public_file={tmp_path / 'robot.key'}",
            "teleop.curve.secret_file=/k/learner.key_secret",
        ]
    )
    client = ClientConfig(**cfg.robot.client)
    assert client.curve == CurveClientKeys(tmp_path / "learner.key_secret", tmp_path / "robot.key")
    assert client.connect_timeout_s == 10.0  # the robot option's own setting kept
    assert cfg.teleop.curve == {"secret_file": "/k/learner.key_secret"}
    with pytest.raises(ConfigError, match="unknown key"):  # a typo outside the free-form dicts still fails
        compose(["robot=fr3", "robot.endpoints=[tcp://10.0.0.2:5555]", "+robot.clients.x=1"])


def test_the_warm_start_is_sim_onlys_default_for_ppo_and_bad_settings_are_refused(tmp_path):
    """``warm_start`` (orchestrator/warm_start.py): on for sim-only PPO as shipped, off for the
    off-policy learners and the hybrid default; a value out of range, a mode without a sim, or a
    task whose expert cannot act in its action mode is one error before anything starts."""
    from rlinf_robot.orchestrator.job import TrainJob

    assert compose(["mode=sim_only"]).warm_starts
    assert not compose(["mode=sim_only", "warm_start.demos=0"]).warm_starts
    assert not compose(["mode=sim_only", "algorithm=sac"]).warm_starts
    assert not compose([]).warm_starts  # hybrid pre-trains from scratch unless asked
    assert compose(["warm_start.demos=16"]).warm_starts
    with pytest.raises(ConfigError, match="warm_start needs"):
        compose(["mode=sim_only", "warm_start.noise=2"])
    with pytest.raises(ConfigError, match="warm_start.log_std"):
        compose(["mode=sim_only", "warm_start.log_std=nan"])
    with pytest.raises(ConfigError, match="has no sim"):
        compose(
            ["mode=real_only", "robot=fr3", "robot.endpoints=[tcp://127.0.0.1:5555]", "warm_start.demos=8"]
        )
    with pytest.raises(ConfigError, match="scripted expert"):
        TrainJob(compose(["mode=sim_only", "task.action_mode=joint_delta", f"run.dir={tmp_path}"]))
    assert not any(tmp_path.iterdir())  # refused before a run dir was made
