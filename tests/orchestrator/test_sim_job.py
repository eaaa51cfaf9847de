"""A sim-only training job through the scheduler (Ray on 127.0.0.1): ``budget.target_success``
stops it once the sim's training success over the last ``pretrain_window`` episodes reaches the
target - the stopping rule ``benchmarks/learning_speed.py`` times."""

from __future__ import annotations

import json

import pytest

from rlinf_robot.orchestrator.config import compose

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_sim_only_job_stops_once_it_reaches_its_target_success(tmp_path, capsys):
    from rlinf_robot.orchestrator.job import TrainJob

    cfg = compose(
        [
            "mode=sim_only",
            "budget.target_success=0.5",
            "budget.pretrain_window=16",
            "budget.wall_s=600",
            "eval.sim_episodes=8",
            "sim.num_envs=8",
            f"run.dir={tmp_path}",
            "run.id=sim",
            "run.progress=false",
            "run.wandb=disabled",
        ]
    )
    res = TrainJob(cfg).run()
    out = capsys.readouterr().out
    rows = [json.loads(x) for x in (res.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [r for r in rows if "update_s" in r]
    print(out[-2000:], train[-1])
    assert "target reached after" in out and not res.interrupted
    assert train[-1]["sim:fr3-reach/success"] >= 0.5
    assert res.state.train_wall_s < 600  # it stopped on the target, not the budget
    assert res.eval["sim"]["n"] >= 8
    # `rlinf-robot record --run` acts with this run's policy: its task, its policy config and the
    # weights of its last checkpoint load into the arm worker's policy as they were trained
    from safetensors.torch import load_file

    import policies
    from rlinf_robot.commands.record import _policy_from_run
    from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv

    env, name, kwargs, weights = _policy_from_run(res.run_dir)
    assert env["task"] == "fr3-reach" and name == "mlp" and weights.exists()
    action_spec, obs_spec = RealRobotEnv.specs(RealEnvConfig.from_dict({**env, "auto_reset": False}))
    policy = policies.make(name, action_spec=action_spec, obs_spec=obs_spec, **kwargs)
    missing, unexpected = policy.load_state_dict(load_file(str(weights)), strict=True)
    assert not missing and not unexpected


def test_target_success_needs_a_sim_and_a_rate():
    from rlinf_robot.errors import ConfigError

    with pytest.raises(ConfigError, match="budget.target_success must be in"):
        compose(["mode=sim_only", "budget.target_success=1.5"])
    with pytest.raises(ConfigError, match="budget.target_success must be in"):
        compose(
            [
                "mode=real_only",
                "robot=fr3",
                "robot.endpoints=[tcp://127.0.0.1:5555]",
                "budget.target_success=0.9",
            ]
        )
