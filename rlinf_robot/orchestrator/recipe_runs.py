"""``rlinf-robot train --recipe NAME``: a registered recipe (``rlinf_robot.algorithms.recipes``) run in
one process on the sim, saved as a run dir like a job's.

The recipes are what learns push and lift today (behaviour cloning of the scripted experts; no RL
recipe beat it on those tasks yet, docs/learning.md), so they are a ``train`` preset of their own
rather than a ``TrainJob`` recipe: no cluster, no arm. What they leave is a run dir the other
commands read: ``config.yaml`` (a ``TrainConfig``, ``mode: sim_only``, with the task and the exact
policy options), ``recipe.json`` (every hyper-parameter), ``metrics.jsonl`` (what the loop
logged), ``eval.json`` (the deterministic success over the recipe's held-out episodes beside a
uniform random policy's) and ``checkpoints/final/actor/model.safetensors`` (the policy's weights),
so ``rlinf-robot record --run runs/<id> --actor policy`` drives the arm with it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlinf_robot.errors import ConfigError


def run_recipe_job(
    name: str,
    seed: int = 0,
    budget_s: float = 900.0,
    runs_dir: str | Path = "runs",
    run_id: str | None = None,
    overrides: dict[str, Any] | None = None,
    say: Callable[[str], None] = print,
):
    """Run recipe ``name`` (with ``overrides`` of its fields) and save it; returns (run dir, result)."""
    from safetensors.torch import save_file

    from rlinf_robot.algorithms.recipes import get_recipe
    from rlinf_robot.orchestrator.config import PolicyConfig, SimConfig, TaskConfig, TrainConfig, to_yaml

    recipe = get_recipe(name, **(overrides or {}))
    if len(recipe.eval_env_names()) > 1:  # its run dir would need a multi-task TrainConfig
        raise ConfigError(
            f"recipe {name} trains one policy on several tasks {list(recipe.eval_env_names())}: not a "
            f"train preset yet; run it with `python benchmarks/learn_tasks.py --recipes {name}`"
        )
    if not recipe.env.startswith("mujoco/"):
        raise ConfigError(f"recipe {name}: its env {recipe.env} is not an embedded MuJoCo task")
    run = Path(runs_dir) / (run_id or f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")
    if (run / "eval.json").exists():
        raise ConfigError(f"{run} already holds a finished run; pick another run.id")
    run.mkdir(parents=True, exist_ok=True)
    cfg = TrainConfig(
        mode="sim_only",
        seed=seed,
        task=TaskConfig(
            name=recipe.env.split("/", 1)[1],
            action_mode=recipe.action_mode,
            control_hz=float(recipe.control_hz),
            terminate_on_success=recipe.terminate_on_success,
        ),
        sim=SimConfig(env=recipe.env, num_envs=recipe.num_envs),
        policy=PolicyConfig(name="mlp", kwargs=recipe.policy_kwargs()),
        algorithm={"name": f"recipe:{name}"},
    )
    cfg.run.dir, cfg.run.id = str(run.parent), run.name
    (run / "config.yaml").write_text(to_yaml(cfg))
    (run / "recipe.json").write_text(json.dumps({"name": name, **dataclasses.asdict(recipe)}, indent=1))
    t0 = time.monotonic()
    with open(run / "metrics.jsonl", "a") as metrics:

        def log(row: dict) -> None:
            metrics.write(json.dumps(row, default=float) + "\n")
            metrics.flush()
            shown = {k: v for k, v in row.items() if isinstance(v, (int, float)) and k != "phase"}
            text = " ".join(
                f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in list(shown.items())[:6]
            )
            say(f"[{time.monotonic() - t0:6.1f}s] {row.get('phase', '')} {text}")

        say(f"recipe {name} on {recipe.env}, seed {seed}, budget {budget_s:g} s -> {run}")
        result = recipe.run(seed=seed, budget_s=budget_s, log=log)
    ckpt = run / "checkpoints" / "final" / "actor"
    ckpt.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in result.policy.state_dict().items()}
    save_file(state, str(ckpt / "model.safetensors"))
    (run / "checkpoints" / "latest").write_text("final")
    random_success = recipe.random_success()
    summary = {
        "recipe": name,
        "seed": seed,
        "env": recipe.env,
        "env_steps": result.env_steps,
        "demo_env_steps": result.demo_env_steps,
        "wall_s": result.wall_s,
        "stopped": result.stopped,
        "train_success": result.train_success,
        "sim": {"success": result.eval_success, "n": result.eval_episodes, "seed": result.eval_seed},
        "random_policy_success": random_success,
    }
    (run / "eval.json").write_text(json.dumps(summary, indent=1))
    say(f"{result.summary()}; random policy {random_success:.2f}")
    return run, result
