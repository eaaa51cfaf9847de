"""The learner-job config: Hydra composition, overrides, and one clear error for a bad key or value."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlinf_robot.errors import ConfigError
from rlinf_robot.orchestrator.config import compose, from_yaml, to_yaml


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


def test_the_cli_reports_a_bad_key_before_starting_anything():
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", "train", "budget.wal_s=3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert "budget.wal_s" in out.stdout and "Traceback" not in out.stdout + out.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_robot_is_one_error_naming_the_endpoint_before_anything_starts(tmp_path):
    endpoint = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
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

    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    server = BridgeServer(KinematicArm(), ServerConfig(endpoint=endpoint, deadman_ms=1000.0)).start()
    try:
        cfg = compose(
            ["robot=fr3", f"robot.endpoints=[{endpoint}]", f"run.dir={tmp_path}", "run.wandb=disabled"]
        )
        job = TrainJob(cfg)
        assert job.run_dir.parent == tmp_path and job.endpoints == [endpoint]
    finally:
        server.stop()
