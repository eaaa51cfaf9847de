"""A sim-only training job through the scheduler (Ray on 127.0.0.1) as ``train mode=sim_only`` ships
it: the warm start (the task's scripted expert recorded in sim and cloned by the actor), then PPO
until ``budget.target_success`` - the sim's training success over the last ``pretrain_window``
episodes - is reached: the stopping rule ``benchmarks/learning_speed.py`` times. (PPO from scratch
through the same job runs in every hybrid test's sim pre-training.)"""

from __future__ import annotations

import json

import pytest

from rlinf_robot.orchestrator.config import compose

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_sim_only_job_clones_the_expert_then_stops_once_it_reaches_its_target_success(tmp_path, capsys):
    from rlinf_robot.orchestrator.job import TrainJob

    cfg = compose(
        [
            "mode=sim_only",
            "budget.target_success=0.95",
            "budget.pretrain_window=32",
            "budget.wall_s=600",
            "eval.sim_episodes=32",
            f"run.dir={tmp_path}",
            "run.id=sim",
            "run.progress=false",
            "run.wandb=disabled",
        ]
    )
    assert cfg.warm_start.demos == 32  # sim-only's shipped default
    res = TrainJob(cfg).run()
    out = capsys.readouterr().out
    rows = [json.loads(x) for x in (res.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [r for r in rows if "update_s" in r]
    warm = [r for r in rows if r.get("phase") == "warm_start"]
    print(out[-2000:], warm, train[-1])
    # the warm start ran once, before any update: the expert's demonstrations, all successful, cloned
    assert len(warm) == 1 and rows.index(warm[0]) < rows.index(train[0])
    assert warm[0]["warm_start/demo_success"] == 1.0 and warm[0]["warm_start/rows"] >= 32 * 50
    assert warm[0]["train/sft_loss"] < 0.2 and warm[0]["train/epochs"] == cfg.warm_start.epochs
    assert res.state.warm_started and "warm start done" in out
    assert "target reached after" in out and not res.interrupted
    assert train[-1]["sim:fr3-reach/success"] >= 0.95
    assert res.state.train_wall_s < 600  # it stopped on the target, not the budget
    # what the clone starts from holds: deterministic success on held-out episodes
    assert res.eval["sim"]["n"] >= 32 and res.eval["sim"]["rate"] >= 0.9, res.eval
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
