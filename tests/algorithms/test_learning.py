"""Real learning on the batched MuJoCo FR3 envs, asserted. Slow: minutes in all.

Reach: episodes run their full 3 s (``terminate_on_success=False``): the task's dense reward is in
[0, 1] per step, so ending an episode on success would make reaching the goal cost future reward (PPO
then learns to hover just outside the success radius). Success = inside the radius at the end.

Push and lift: the registered recipes (``rlinf_robot.algorithms.recipes``) on a CI budget, scored at
the time limit as well (the block must still be on the target / in the air when the episode ends),
each next to a random policy's success on the same held-out episodes. The multi-task pixel VLA
(``vla_pixels``: one model, three tasks, cameras and instruction) the same way.
"""

from __future__ import annotations

import pytest
import torch

import policies

# Minutes on an idle 2-core machine; the generous timeout is for a machine shared with other jobs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
sim = pytest.importorskip("sim")
pytest.importorskip("mujoco")

ENV = "mujoco/fr3-reach"
ENV_CFG = {"terminate_on_success": False}
TARGET, WINDOW = 0.95, 32


def make_env(n: int):
    return sim.make(ENV, num_envs=n, **ENV_CFG)


@pytest.fixture(scope="module")
def random_success() -> float:
    """A uniform random policy on the same 64 held-out episodes (seed 999): the floor to clear."""
    from rlinf_robot.algorithms.loops.evaluate import evaluate
    from rlinf_robot.algorithms.recipes import _UniformPolicy

    env = make_env(16)
    try:
        return evaluate(env, _UniformPolicy(env.action_spec, 0), 64, seed=999)
    finally:
        env.close()


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def ppo_result():
    from rlinf_robot.algorithms.loops.evaluate import evaluate
    from rlinf_robot.algorithms.loops.ppo_loop import PPOConfig, train_ppo

    torch.manual_seed(0)
    env = make_env(16)
    pol = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, hidden=(64, 64))
    cfg = PPOConfig(num_steps=16, minibatch_size=256, epochs=10, lr=1e-3, gamma=0.95)
    res = train_ppo(env, pol, cfg, max_env_steps=150_000, seed=0, target_success=TARGET, window=WINDOW)
    env.close()
    return res, evaluate(make_env(16), pol, 64, seed=999)


def test_ppo_mlp_reaches_95_percent_success(ppo_result, random_success):
    res, eval_success = ppo_result
    print(
        f"PPO: {res.env_steps} env steps, {res.wall_s:.0f} s, eval success {eval_success:.2f}; "
        f"random policy {random_success:.2f}"
    )
    assert res.reached, res.history[-1]
    assert random_success < 0.2 and eval_success >= TARGET


def test_sac_reaches_it_with_fewer_env_steps(ppo_result, random_success):
    from rlinf_robot.algorithms.loops.evaluate import evaluate
    from rlinf_robot.algorithms.loops.sac_loop import SACConfig, train_sac

    ppo_steps = ppo_result[0].env_steps
    torch.manual_seed(0)
    env = make_env(8)
    pol = policies.make(
        "mlp",
        action_spec=env.action_spec,
        obs_spec=env.obs_spec,
        squash=True,
        obs_norm=False,
        hidden=(128, 128),
        activation="relu",
        value_head=False,
    )
    cfg = SACConfig(
        learning_starts=1000, critic_hidden=(128, 128), batch_size=128, utd=0.25, gamma=0.95, lr=1e-3
    )
    res = train_sac(env, pol, cfg, max_env_steps=ppo_steps, seed=0, target_success=TARGET, window=WINDOW)
    env.close()
    eval_success = evaluate(make_env(16), pol, 64, seed=999)
    print(
        f"SAC: {res.env_steps} env steps (PPO: {ppo_steps}), {res.wall_s:.0f} s, eval success "
        f"{eval_success:.2f}; random policy {random_success:.2f}"
    )
    assert res.reached and res.env_steps < ppo_steps, res.history[-1]
    assert eval_success >= 0.9


def test_tiny_vla_sft_then_grpo_beats_sft_alone():
    """Behaviour cloning from a small set of scripted demos, then GRPO on the same env: the
    fine-tuned policy succeeds more often than the SFT policy on the same evaluation seeds."""
    from rlinf_robot.algorithms.loops.evaluate import evaluate
    from rlinf_robot.algorithms.loops.grpo_loop import GRPOConfig, train_grpo
    from rlinf_robot.algorithms.loops.sft_loop import SFTConfig, collect_demos, train_sft
    from sim.mujoco.experts import reach

    H = 4
    demo_env = make_env(8)
    demos = collect_demos(demo_env, lambda obs: reach(demo_env, obs), num_steps=60, chunk_size=H, seed=0)
    assert demos.success_rate == 1.0
    torch.manual_seed(0)
    pol = policies.make(
        "tiny_vla",
        action_spec=demo_env.action_spec,
        obs_spec=demo_env.obs_spec,
        chunk_size=H,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        init_log_std=-2.0,
    )
    assert pol.model.config.cameras == []  # state + instruction: cameras cost CPU render time here
    train_sft(pol, demos, SFTConfig(epochs=40, batch_size=64, lr=2e-3))
    eval_env = make_env(16)
    sft_success = evaluate(eval_env, pol, 32, seed=999)
    env = make_env(16)
    cfg = GRPOConfig(
        group_size=4, max_decisions=60 // H, lr=3e-4, epochs=2, minibatch_size=128, reward="success"
    )  # the outcome: on the episode return GRPO got closer on average but less often inside the radius
    res = train_grpo(env, pol, cfg, iterations=8, seed=0)
    rl_success = evaluate(eval_env, pol, 32, seed=999)
    print(
        f"tiny_vla: SFT alone {sft_success:.2f} -> SFT + GRPO {rl_success:.2f} "
        f"({res.env_steps} RL env steps, {res.wall_s:.0f} s)"
    )
    assert rl_success > sft_success


#: The CI budget of each recipe (the full ones, in benchmarks/learn_tasks.py, record 128 demos:
#: push 0.97-0.98, lift 1.00) and the success it must reach on the recipe's 64 held-out episodes.
CI_RUNS = {
    "push_sft": ({"demo_episodes": 64}, 0.5),
    "lift_sft": ({"demo_episodes": 32}, 0.7),
}


@pytest.mark.parametrize("name", sorted(CI_RUNS))
def test_recipe_learns_object_task_on_a_ci_budget(name):
    from rlinf_robot.algorithms.recipes import get_recipe

    overrides, threshold = CI_RUNS[name]
    recipe = get_recipe(name, **overrides)
    res = recipe.run(seed=0, budget_s=600)  # a minute or less on an idle machine
    random_success = recipe.random_success()  # uniform random actions, same held-out episodes
    print(f"{res.summary()}; random policy {random_success:.2f}")
    assert res.demo_success == 1.0, res
    assert random_success < 0.1 <= threshold
    assert res.eval_success >= threshold


#: The multi-task VLA (``vla_pixels``: front and wrist cameras at 96 px, the instruction, the robot's
#: proprioception) on a CI budget: 48 demo episodes per task and 24 SFT epochs on a cosine schedule
#: instead of 96 and 100, scored on 32 held-out episodes per task instead of 256. Measured at this
#: budget (one thread beside another run, 2026-12-07, the 100-degree wrist camera): reach 0.28, push
#: 0.12, lift 0.84 (mean 0.42; 12 epochs: 0.06 / 0.06 / 0.34), a random policy 0.00 on each; the full
#: recipe: docs/learning.md.
VLA_CI = {"demo_episodes": 48, "eval_episodes": 32, "demo_envs": 8, "eval_envs": 8, "grpo_iterations": 0}
VLA_CI_EPOCHS = 24
LIFT_MIN, MEAN_MIN = 0.5, 0.25


@pytest.mark.timeout(3600)
def test_multitask_vla_learns_from_pixels_and_language_on_a_ci_budget():
    from rlinf_robot.algorithms.loops.sft_loop import SFTConfig
    from rlinf_robot.algorithms.recipes import get_recipe

    sft = SFTConfig(epochs=VLA_CI_EPOCHS, batch_size=128, lr=1e-3, loss="l1", lr_schedule="cosine")
    recipe = get_recipe("vla_pixels", sft=sft, **VLA_CI)
    # ~8 min here beside another run; the budget is for a busy machine
    res = recipe.run(seed=0, budget_s=3000)
    random_success = recipe.random_success()  # uniform random actions, same held-out episodes
    print(f"{res.summary()}; random policy {random_success:.2f} (best task)")
    assert res.stopped == "done", res  # the whole SFT ran: a budget cut would test a shorter one
    assert res.demo_success == 1.0, res
    assert random_success < 0.05
    assert res.eval_by_task["mujoco/fr3-lift"] >= LIFT_MIN, res.eval_by_task
    assert res.eval_success >= MEAN_MIN, res.eval_by_task
