"""Recipes and expert recording, fast: the registry, DART-noised demonstrations as SFT chunks and RLPD
transitions, and one tiny recipe run end to end (the learning itself: test_learning.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import policies
from rlinf_robot.algorithms.loops.demos import record_expert
from rlinf_robot.algorithms.loops.sft_loop import SFTConfig
from rlinf_robot.algorithms.recipes import (
    ALL_TASKS,
    PPORecipe,
    SACRecipe,
    SFTRecipe,
    available_recipes,
    get_recipe,
    register_recipe,
)
from rlinf_robot.errors import ConfigError
from tests.algorithms.point_env import PointReachEnv


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_registry_gives_fresh_typed_copies_and_names_what_is_wrong():
    assert {"reach_ppo", "reach_sac", "push_sft", "lift_sft"} <= set(available_recipes())
    reach = get_recipe("reach_ppo")
    assert isinstance(reach, PPORecipe) and reach.hidden == (64, 64) and reach.num_envs == 16
    assert (reach.ppo.num_steps, reach.ppo.lr, reach.ppo.gamma) == (16, 1e-3, 0.95)
    assert reach.terminate_on_success is False
    reach.ppo.lr = 0.5  # a copy: the registered recipe is untouched
    assert get_recipe("reach_ppo").ppo.lr == 1e-3
    push = get_recipe("push_sft", demo_episodes=8)
    assert isinstance(push, SFTRecipe) and push.demo_episodes == 8 and push.env == "mujoco/fr3-push"
    with pytest.raises(ConfigError, match="known: .*push_sft"):
        get_recipe("push_ppo2")
    with pytest.raises(ConfigError, match="demo_episodez"):
        get_recipe("push_sft", demo_episodez=8)
    with pytest.raises(ConfigError, match="num_envs"):
        get_recipe("push_sft", num_envs=0)
    with pytest.raises(ConfigError, match=r"execute_rows must be None or an int in \[1, chunk_size=1\]"):
        get_recipe("push_sft", execute_rows=2)
    with pytest.raises(ConfigError, match="execute_rows"):
        get_recipe("vla_pixels", execute_rows=0)
    with pytest.raises(ConfigError, match="demo_noise"):
        get_recipe("lift_sft", demo_noise=2.0)
    with pytest.raises(ConfigError, match="sft_epochs needs demonstrations"):
        SACRecipe(name="x", sft_epochs=5)
    with pytest.raises(ValueError, match="taken"):
        register_recipe(get_recipe("reach_sac"))


def test_dart_demos_label_the_expert_and_store_what_was_executed():
    env = PointReachEnv(4, max_steps=6, seed=0)
    rec = record_expert(env, lambda o: env.expert_actions(), episodes=8, seed=0, noise=0.2)
    assert rec.episodes >= 8 and rec.env_steps == rec.dones.size
    assert not np.allclose(rec.labels, rec.executed)  # noise went into the env, not into the labels
    assert np.all(rec.executed >= env.action_spec.low) and np.all(rec.executed <= env.action_spec.high)
    sft = rec.demo_set(chunk_size=2)
    assert len(sft) == rec.kept_steps and sft.actions.shape[1:] == (2, 6)
    kept = rec.keep.reshape(-1)
    np.testing.assert_array_equal(sft.actions[:, 0].numpy(), rec.labels.reshape(-1, 6)[kept])
    # transitions: executed rows (normalized), the summed reward of the chunk, the state after it
    pol = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, chunk_size=2, squash=True)
    buf = rec.replay_buffer(pol, chunk_size=2)
    t, n = np.argwhere(rec.keep[:-1] & (rec.episode[:-1] == rec.episode[1:]))[0]
    data = buf.sample(len(buf) * 20, torch.Generator().manual_seed(0))
    row = np.flatnonzero(np.all(np.isclose(data["state"].numpy(), rec.obs["state"][t, n].numpy()), axis=1))[0]
    want = pol.normalize_actions(rec.executed[t : t + 2, n]).flatten().numpy()
    np.testing.assert_allclose(data["action"][row].numpy(), want, atol=1e-6)
    assert data["reward"][row].item() == pytest.approx(rec.rewards[t : t + 2, n].sum(), rel=1e-5)
    np.testing.assert_allclose(data["next_state"][row].numpy(), rec.next_state[t + 1, n])
    with pytest.raises(ValueError, match="chunk_size"):
        rec.replay_buffer(pol, chunk_size=3)


def test_a_tiny_recipe_runs_end_to_end_and_stops_at_its_budget():
    pytest.importorskip("mujoco")
    tiny = dict(demo_episodes=1, demo_envs=4, eval_episodes=4, eval_envs=4, sft=SFTConfig(epochs=2))
    res = get_recipe("push_sft", **tiny).run(seed=0, budget_s=600)
    assert res.stopped == "done" and res.demo_success == 1.0 and res.env_steps == 0
    assert res.demo_env_steps == 4 * 60 and res.eval_episodes == 4 and 0.0 <= res.eval_success <= 1.0
    assert [e["phase"] for e in res.history] == ["demos", "sft", "sft"]
    late = get_recipe("push_sft", **tiny).run(seed=1, budget_s=1e-3)  # spent while recording
    assert late.stopped == "budget" and [e["phase"] for e in late.history] == ["demos", "sft"]
    with pytest.raises(ConfigError, match="eval seed"):
        get_recipe("push_sft", **tiny).run(seed=999)


def _tiny_vla(**overrides):
    """vla_pixels shrunk to seconds: 32 px images, one env per task, a narrow model, one RL round."""
    small = {"hidden_size": 32, "keypoint_channels": 8, "num_keypoints": 4}
    base = {
        "image_size": 32,
        "num_envs": 1,
        "vla": {**get_recipe("vla_pixels").vla, **small},
        "grpo_iterations": 1,
    }
    return get_recipe("vla_pixels", **{**base, **overrides})


def test_the_pixel_vla_recipe_runs_on_every_task_and_scores_each():
    """vla_pixels, shrunk: demos of reach, push and lift through one MultiTaskEnv, SFT, one GRPO
    round, then each task's own held-out episodes (the learning itself: test_learning.py)."""
    pytest.importorskip("mujoco")
    from rlinf_robot.algorithms.loops.grpo_loop import GRPOConfig
    from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS

    recipe = _tiny_vla(
        demo_episodes=1,
        demo_envs=1,
        eval_episodes=1,
        eval_envs=1,
        sft=SFTConfig(epochs=2, batch_size=64, aux_coef=1.0),
        grpo=GRPOConfig(group_size=2, max_decisions=3, epochs=1),
        grpo_envs=None,  # num_envs per task
    )
    res = recipe.run(seed=0, budget_s=600)
    assert set(res.eval_by_task) == set(recipe.tasks) and res.stopped == "done"
    assert res.eval_success == pytest.approx(np.mean(list(res.eval_by_task.values())))
    assert res.demo_success == 1.0 and res.env_steps > 0
    assert [e["phase"] for e in res.history] == ["demos", "sft", "sft", "sft_eval", "grpo"]
    # the clone was scored on the same held-out episodes before RL: each task's comparison pairs them
    assert set(res.rl_vs_sft) == {*recipe.tasks, ALL_TASKS}
    for name in recipe.tasks:
        paired = res.rl_vs_sft[name]
        assert paired.episodes == recipe.eval_episodes and paired.after == res.eval_by_task[name]
        assert paired.before == res.history[3][f"eval_{name.split('/')[-1]}"]
    pooled = res.rl_vs_sft[ALL_TASKS]  # every task's episodes in one sign test
    assert pooled.episodes == len(recipe.tasks) * recipe.eval_episodes
    assert pooled.wins == sum(res.rl_vs_sft[n].wins for n in recipe.tasks)
    assert pooled.losses == sum(res.rl_vs_sft[n].losses for n in recipe.tasks)
    assert pooled.after == pytest.approx(res.eval_success)  # equal episodes per task
    assert "RL vs SFT, fr3-push:" in res.summary() and "RL vs SFT, all:" in res.summary()
    # the frames/s of the rollout and the learner: each stage's rate, and the RL round's split
    (grpo,) = [e for e in res.history if e["phase"] == "grpo"]
    assert grpo["rollout_s"] > 0 and grpo["update_s"] > 0
    assert grpo["rollout_env_steps_per_s"] == pytest.approx(grpo["env_steps"] / grpo["rollout_s"])
    assert grpo["update_decisions_per_s"] == pytest.approx(grpo["decisions"] / grpo["update_s"])  # 1 epoch
    assert res.history[0]["frames_per_s"] > 0
    for part in ("recording", "frames/s", "SFT", "samples/s", "RL rollout", "env steps/s", "RL update"):
        assert part in res.throughput() and part in res.summary(), res.summary()
    sft = [e for e in res.history if e["phase"] == "sft"]
    assert sft[1]["aux_loss"] < sft[0]["aux_loss"]  # the privileged columns are being learned
    cfg = res.policy.model.config
    assert cfg.aux_dim == 13  # lift's task columns, the widest (reach 6, push 12)
    assert cfg.cameras == ["front", "wrist"] and cfg.vision_encoder == "keypoints" and cfg.pool_text
    # proprioception only: the model reads the robot's 22 columns of any task's state
    assert cfg.state_columns == list(range(sum(w for _, w in ROBOT_STATE_FIELDS)))
    with pytest.raises(ConfigError, match="tasks must be embedded MuJoCo envs"):
        get_recipe("vla_pixels", tasks=("isaac/reach",))


def test_rl_starts_from_a_saved_clone_with_its_own_env_count_per_task(tmp_path):
    """init_from: the RL stage from a clone saved with save_pretrained (no demos, no SFT), scored
    on the same held-out episodes before RL as the policy it was saved from; grpo_envs: the RL
    rounds' envs per task; the greedy baseline's success on the round's starts is logged."""
    pytest.importorskip("mujoco")
    from rlinf_robot.algorithms.loops.grpo_loop import GRPOConfig

    recipe = _tiny_vla(
        eval_episodes=2,
        eval_envs=2,
        grpo=GRPOConfig(group_size=2, max_decisions=3, epochs=1, baseline="greedy"),
        grpo_envs=(1, 2, 1),
    )
    env = recipe.make_env(per_task=recipe.grpo_envs)
    try:
        assert env.sizes == [1, 2, 1] and env.num_envs == 4
        torch.manual_seed(0)
        clone = recipe.make_policy(env)
    finally:
        env.close()
    clone.save_pretrained(tmp_path / "clone")
    before = recipe.evaluate_outcomes(clone)
    res = dataclasses.replace(recipe, init_from=str(tmp_path / "clone")).run(seed=1)
    assert [e["phase"] for e in res.history] == ["sft", "sft_eval", "grpo"]
    assert res.demo_env_steps == 0 and res.demo_success is None and res.env_steps > 0
    assert res.history[0]["init_from"] == str(tmp_path / "clone")
    for name, outcomes in before.items():  # the loaded clone acts as the saved one did
        assert res.rl_vs_sft[name].before == float(np.mean(outcomes))
    assert 0.0 <= res.history[2]["greedy_success"] <= 1.0
    for bad in ((1, 2), (0, 1, 1), (1, 1.5, 1)):
        with pytest.raises(ConfigError, match="grpo_envs must be one int >= 1 per task"):
            get_recipe("vla_pixels", grpo_envs=bad)
