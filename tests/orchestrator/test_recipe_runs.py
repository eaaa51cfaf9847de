"""``rlinf-robot train --recipe``: a registered recipe run as a command, saved as a run dir that the
other commands read (``record --run`` rebuilds its policy from config.yaml and the checkpoint)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
CLI = [sys.executable, "-m", "rlinf_robot.cli", "train"]
TINY = ["demo_episodes=2", "demo_envs=4", "eval_episodes=4", "eval_envs=4", "sft.epochs=2"]


def test_a_recipe_runs_as_a_train_preset_and_leaves_a_run_dir_record_can_use(tmp_path):
    from safetensors.torch import load_file

    import policies
    from rlinf_robot.commands.record import _policy_from_run
    from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv

    out = subprocess.run(
        [*CLI, "--recipe", "push_sft", *TINY, f"run.dir={tmp_path}", "run.id=push", "--budget", "600"],
        capture_output=True, text=True, timeout=800,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    run = tmp_path / "push"
    result = json.loads((run / "eval.json").read_text())
    assert result["recipe"] == "push_sft" and result["demo_env_steps"] > 0 and result["env_steps"] == 0
    assert result["sim"]["n"] == 4 and 0.0 <= result["sim"]["success"] <= 1.0
    assert "random_policy_success" in result and result["stopped"] == "done"
    recipe = json.loads((run / "recipe.json").read_text())
    assert recipe["demo_episodes"] == 2 and recipe["sft"]["epochs"] == 2
    phases = [json.loads(x)["phase"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert phases == ["demos", "sft", "sft", "eval"], phases
    env, name, kwargs, weights = _policy_from_run(run)
    assert env["task"] == "fr3-push" and env["control_hz"] == 10.0 and kwargs["hidden"] == [256, 256]
    action_spec, obs_spec = RealRobotEnv.specs(RealEnvConfig.from_dict({**env, "auto_reset": False}))
    policy = policies.make(name, action_spec=action_spec, obs_spec=obs_spec, **kwargs)
    policy.load_state_dict(load_file(str(weights)), strict=True)
    # the same run id again is refused, naming it; so are a field the recipe lacks and an unknown recipe
    again = subprocess.run([*CLI, "--recipe", "push_sft", *TINY, f"run.dir={tmp_path}", "run.id=push"],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert again.returncode == 2 and "already holds a finished run" in again.stdout, again.stdout
    for bad, why in [(["--recipe", "push_sft", "demo_episodez=3"], "has no field 'demo_episodez'"),
                     (["--recipe", "push_sft", "sft.epochz=3"], "'sft.epochz' names no field"),
                     (["--recipe", "push_it"], "unknown recipe 'push_it'"),
                     (["--recipe", "vla_pixels"], "not a train preset yet")]:  # fmt: skip
        res = subprocess.run([*CLI, *bad], capture_output=True, text=True, timeout=300)
        assert res.returncode == 2 and why in res.stdout, (bad, res.stdout, res.stderr[-1000:])
