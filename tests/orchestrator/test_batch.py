"""Hybrid PPO's batch assembly, the source-tagged buffer and the real replay on disk."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.envs.spec import ActionSpec
from rlinf_robot.orchestrator import ppo
from rlinf_robot.orchestrator.buffer import EpisodeStore, SourceBuffer

S = ppo.PPOSettings(gamma=0.9, lam=1.0)
#: the ee_delta action space the policy-level tests build their mlp for
EE_SPEC = ActionSpec(
    mode="ee_delta",
    shape=(6,),
    low=np.full(6, -0.02, np.float32),
    high=np.full(6, 0.02, np.float32),
    control_hz=20.0,
)


def fake_traj(T=4, N=3, S_=5, seed=0):
    rng = np.random.default_rng(seed)
    trunc = np.zeros((T, N), bool)
    trunc[1, 0] = True
    return {
        "states": rng.normal(size=(T + 1, N, S_)).astype(np.float32),
        "raw_actions": rng.normal(size=(T, N, 1, 6)).astype(np.float32),
        "actions": np.zeros((T, N, 1, 6), np.float32),
        "log_prob": rng.normal(size=(T, N)).astype(np.float32),
        "value": np.zeros((T, N), np.float32),
        "rewards": np.ones((T, N), np.float32),
        "terminated": np.zeros((T, N), bool),
        "truncated": trunc,
        "success": np.zeros((T, N), bool),
        "final_states": np.zeros((T, N, S_), np.float32),
        "versions": np.full((T, 1), 7),
    }


def fake_episode(version, steps=5, aborted=False, source="real:arm0"):
    return {
        "states": np.zeros((steps + 1, 5), np.float32),
        "final_state": np.zeros(5, np.float32),
        "raw_actions": np.zeros((steps, 1, 6), np.float32),
        "actions": np.zeros((steps, 1, 6), np.float32),
        "log_prob": np.zeros(steps, np.float32),
        "value": np.zeros(steps, np.float32),
        "versions": np.full(steps, version),
        "rewards": np.ones(steps, np.float32),
        "terminated": np.zeros(steps, bool),
        "truncated": np.r_[np.zeros(steps - 1, bool), True],
        "success": np.zeros(steps, bool),
        "executed": np.ones(steps, np.int64),
        "images": {},
        "meta": {
            "source": source,
            "aborted": aborted,
            "steps": steps,
            "success": False,
            "return": 5.0,
            "reason": "link lost" if aborted else "",
            "t_start": 0.0,
            "t_end": 1.0,
        },
    }


def test_sim_rows_bootstrap_truncations_and_gae_by_hand():
    traj = fake_traj()
    final_v = np.full((4, 3), 2.0)
    rows = ppo.sim_rows(traj, final_v, np.full(3, 10.0), S)
    adv = rows["advantages"].reshape(4, 3)
    # env 0 was truncated at t=1: r_1 = 1 + 0.9 * V(final) = 2.8, and no bootstrap across it
    assert adv[1, 0] == pytest.approx(2.8)
    assert adv[0, 0] == pytest.approx(1 + 0.9 * 2.8)
    # env 1 runs through: A_3 = r + 0.9 * V(last) = 1 + 9
    assert adv[3, 1] == pytest.approx(10.0)
    assert rows["state"].shape == (12, 5) and not rows["real"].any()
    np.testing.assert_array_equal(rows["behaviour_log_prob"], rows["proximal_log_prob"])


def test_episode_rows_bootstrap_a_time_limit_only():
    ep = fake_episode(3, steps=3)
    rows = ppo.episode_rows(ep, np.zeros(3), np.zeros(3), final_value=10.0, s=S)
    assert rows["advantages"][-1] == pytest.approx(1 + 0.9 * 10.0)
    ep["terminated"][-1], ep["truncated"][-1] = True, False
    rows = ppo.episode_rows(ep, np.zeros(3), np.zeros(3), final_value=10.0, s=S)
    assert rows["advantages"][-1] == pytest.approx(1.0) and rows["real"].all()


@pytest.mark.parametrize("fraction, have", [(0.25, 500), (0.25, 7), (0.5, 100)])
def test_the_batch_holds_the_configured_real_share(fraction, have):
    sim = ppo.sim_rows(fake_traj(T=16, N=16), np.zeros((16, 16)), np.zeros(16), S)
    real = ppo.concat_rows([ppo.episode_rows(fake_episode(5, have), np.zeros(have), np.zeros(have), 0.0, S)])
    rows = ppo.mix(sim, real, fraction, np.random.default_rng(0))
    share = rows["real"].mean()
    assert abs(share - fraction) < 0.01, share
    assert (~rows["real"]).sum() == 256  # every sim row, once


def test_staleness_bound_and_aborted_episodes():
    buf = SourceBuffer(max_staleness=4)
    assert buf.add(fake_episode(10)) and buf.add(fake_episode(15))
    assert not buf.add(fake_episode(16, aborted=True))  # kept out, counted
    fresh = buf.fresh(version=18)
    assert [int(e["versions"][0]) for e in fresh] == [15]  # 18 - 10 > 4: dropped for good
    assert buf.counts["real:arm0/stale"] == 1 and buf.counts["real:arm0/aborted"] == 1
    assert buf.fresh(version=30) == [] and buf.counts["real:arm0/stale"] == 2


def test_an_episode_with_a_non_finite_number_is_not_trained_on():
    """One NaN reward would make every weight NaN: such an episode is counted and kept out; an
    operator's steps may lack a behaviour log-prob."""
    buf = SourceBuffer(max_staleness=4)
    bad = fake_episode(1)
    bad["rewards"][2] = np.nan
    assert not buf.add(bad) and buf.counts["real:arm0/non_finite"] == 1
    human = fake_episode(1)
    human["intervened"] = np.array([False, True, False, False, False])
    human["log_prob"][1] = np.nan
    assert buf.add(human)
    human["log_prob"][0] = np.nan  # a policy step without its log-prob is not usable
    assert not buf.add(human) and buf.counts["real:arm0/non_finite"] == 2


def test_the_real_replay_round_trips_without_pickle(tmp_path):
    store = EpisodeStore(tmp_path)
    ep = fake_episode(4)
    ep["images"] = {"front": np.arange(6 * 8 * 8 * 3, dtype=np.uint8).reshape(6, 8, 8, 3)}
    store.write(ep)
    (tmp_path / "episode_000001.npz.tmp").write_bytes(b"half an episode")  # a crash mid-write
    [back] = store.read_all()
    assert back["meta"] == ep["meta"]
    for key in ("states", "raw_actions", "rewards", "versions", "truncated"):
        np.testing.assert_array_equal(back[key], ep[key])
    np.testing.assert_array_equal(back["images"]["front"], ep["images"]["front"])


def test_a_fresh_real_row_is_scored_under_the_policy_the_arm_explored_with():
    """RealEnvWorker explores with the policy's noise times ``noise_scale``; the learner scores its
    rows under that same distribution (the batch's ``noise_scale``), through decoupled PPO's loss,
    so a fresh row's importance weight is 1. Scored under the full-width policy it would be far
    below 1 (the ~0.04 per row a hybrid run measured at scale 0.3)."""
    from types import SimpleNamespace

    import torch

    import policies
    from rlinf_robot.algorithms import get_objective
    from rlinf_robot.workers.real_env import RealEnvWorker

    torch.manual_seed(0)
    policy = policies.make("mlp", action_spec=EE_SPEC, state_dim=5)
    worker = SimpleNamespace(_acting=policy, _acting_version=4, noise_scale=0.3, _torch=torch)
    state = np.random.default_rng(0).normal(size=(64, 5)).astype(np.float32)
    obs = {"state": state, "images": {}, "instruction": []}
    _, raw, logp, _, version = RealEnvWorker._act(worker, obs, False)
    assert version == 4
    raw = torch.as_tensor(raw)
    scale = torch.full((64,), 0.3)
    with torch.no_grad():
        arm = policy({"obs": obs, "raw_actions": raw, "noise_scale": scale})["log_prob"]
        full = policy({"obs": obs, "raw_actions": raw})["log_prob"]
    np.testing.assert_allclose(arm.numpy(), logp, rtol=1e-5, atol=1e-4)
    assert float(torch.exp(full - torch.as_tensor(logp)).median()) < 0.2  # what scoring at scale 1 gave
    batch = {
        "obs": obs,
        "raw_actions": raw,
        "behaviour_log_prob": torch.as_tensor(logp),
        "proximal_log_prob": arm,
        "noise_scale": scale,
        "advantages": torch.ones(64),
    }
    _, stats = get_objective("decoupled_ppo")(policy, batch)
    assert float(stats["mean_is_weight"]) == pytest.approx(1.0, abs=1e-3)


def test_cotrain_demo_rows_train_only_the_bc_term():
    """RLinf-Co (mode=cotrain): demonstration rows join the PPO batch with ``mask`` 0 and
    ``bc_mask`` 1; the objective clones them (bc_loss) and leaves PPO's terms to the RL rows."""
    import torch

    import policies
    from rlinf_robot.algorithms import get_objective

    torch.manual_seed(0)
    policy = policies.make("mlp", action_spec=EE_SPEC, state_dim=5)
    rows = ppo.sim_rows(fake_traj(), np.zeros((4, 3)), np.zeros(3), S)
    ep = fake_episode(version=1, steps=5)
    ep["actions"] = np.full((5, 1, 6), 0.01, np.float32)
    demos = ppo.demo_rows([ep, ep])
    assert demos["state"].shape == (10, 5) and demos["actions"].shape == (10, 1, 6)
    batch = ppo.with_demos(ppo.to_batch(rows), demos)
    assert batch["obs"]["state"].shape[0] == 12 + 10
    assert batch["mask"].tolist() == [1.0] * 12 + [0.0] * 10 and batch["bc_mask"].sum() == 10
    objective = get_objective("decoupled_ppo")
    loss_bc, stats = objective(policy, batch, bc_coef=1.0)
    loss_no, _ = objective(policy, batch, bc_coef=0.0)
    # the mean starts at ~0 (normalized); the target 0.01 of a +-0.02 range is 0.5 normalized
    assert float(stats["bc_loss"]) == pytest.approx(0.5, abs=0.05)
    assert float((loss_bc - loss_no).detach()) == pytest.approx(float(stats["bc_loss"]), rel=1e-5)
    # the RL rows alone give the same PPO loss as the batch without demos
    loss_rl, _ = objective(policy, ppo.to_batch(rows))
    assert float(loss_no.detach()) == pytest.approx(float(loss_rl.detach()), rel=1e-5, abs=1e-6)


def test_an_operators_steps_leave_ppos_terms_and_become_bc_rows():
    """Teleop: the steps an operator took over (``intervened``, no behaviour log-prob: NaN) get
    ``mask`` 0 in PPO's terms, no NaN reaches the loss, and they join the batch as BC rows."""
    import torch

    import policies
    from rlinf_robot.algorithms import get_objective

    torch.manual_seed(0)
    policy = policies.make("mlp", action_spec=EE_SPEC, state_dim=5)
    ep = fake_episode(version=1, steps=6)
    ep["intervened"] = np.array([False, True, True, False, False, True])
    ep["log_prob"][ep["intervened"]] = np.nan
    ep["actions"][ep["intervened"]] = 0.01
    ep["states"][:6] = np.arange(6)[:, None]
    rows = ppo.episode_rows(ep, np.zeros(6), np.full(6, -1.0), 0.0, S)
    assert np.isfinite(rows["behaviour_log_prob"]).all()
    assert rows["intervened"].tolist() == ep["intervened"].tolist()
    demos = ppo.intervention_rows([ep, fake_episode(version=1, steps=4)])
    assert demos["state"][:, 0].tolist() == [1.0, 2.0, 5.0] and np.all(demos["actions"] == 0.01)
    batch = ppo.with_demos(ppo.to_batch(rows), demos)
    assert batch["mask"].tolist() == [1.0, 0.0, 0.0, 1.0, 1.0, 0.0] + [0.0] * 3
    assert batch["bc_mask"].tolist() == [0.0] * 6 + [1.0] * 3
    loss, stats = get_objective("decoupled_ppo")(policy, batch, bc_coef=1.0)
    assert torch.isfinite(loss) and float(stats["bc_loss"]) == pytest.approx(0.5, abs=0.05)
    assert ppo.intervention_rows([fake_episode(version=1)]) is None  # episodes without teleop


def test_tiny_vla_trains_on_the_jobs_batches_with_the_task_instruction():
    """policy=tiny_vla in a job: the policy is built from the env's ObsSpec (as the job's workers
    build it) and the job's batches carry the task's instruction on every row."""
    import torch

    import policies
    import sim
    from rlinf_robot.algorithms import get_objective
    from rlinf_robot.envs.tasks import make_task

    env = sim.make("mujoco/fr3-reach", num_envs=2)
    try:
        spec, obs_spec = env.action_spec, env.obs_spec
        state = env.reset(seed=0)["state"]
    finally:
        env.close()
    torch.manual_seed(0)
    policy = policies.make("tiny_vla", action_spec=spec, obs_spec=obs_spec)
    instruction = make_task("fr3-reach").instruction
    T, N = 4, 3
    traj = fake_traj(T=T, N=N, S_=state.shape[1])
    traj["raw_actions"] = np.zeros((T, N, policy.chunk_size, spec.shape[0]), np.float32)
    batch = ppo.to_batch(ppo.sim_rows(traj, np.zeros((T, N)), np.zeros(N), S), instruction)
    assert batch["obs"]["instruction"] == [instruction] * (T * N)
    loss, stats = get_objective("decoupled_ppo")(policy, batch, vf_coef=0.5)
    loss.backward()
    assert torch.isfinite(loss) and any(p.grad is not None for p in policy.parameters())
