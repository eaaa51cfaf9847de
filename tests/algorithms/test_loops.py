"""The training loops on a tiny numpy env (fast): they learn, chunk, record and batch correctly."""

import numpy as np
import pytest
import torch

import policies
from policies.base import PolicyOutput
from rlinf_robot.algorithms.buffers import ReplayBuffer
from rlinf_robot.algorithms.loops.evaluate import compare_paired, episode_outcomes, evaluate
from rlinf_robot.algorithms.loops.grpo_loop import GRPOConfig, collect_groups
from rlinf_robot.algorithms.loops.ppo_loop import PPOConfig, train_ppo
from rlinf_robot.algorithms.loops.rollout import (
    EpisodeTracker,
    episode_success,
    flatten_obs,
    stack_obs,
    take_obs,
)
from rlinf_robot.algorithms.loops.sac_loop import SACConfig, train_sac
from rlinf_robot.algorithms.loops.sft_loop import SFTConfig, collect_demos, train_sft
from rlinf_robot.errors import ConfigError
from tests.algorithms.point_env import PointReachEnv


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_obs_stacking_and_indexing():
    env = PointReachEnv(3, image_size=8)
    o1, o2 = env.reset(seed=0), env.step(np.zeros((3, 6), np.float32))[0]
    flat = flatten_obs(stack_obs([o1, o2]))
    assert flat["state"].shape == (6, 6) and flat["images"]["front"].shape == (6, 8, 8, 3)
    sub = take_obs(flat, torch.tensor([4, 0]))
    np.testing.assert_array_equal(sub["state"].numpy(), np.stack([o2["state"][1], o1["state"][0]]))
    assert sub["instruction"] == ["reach the goal"] * 2


def test_episode_success_of_a_chunk_is_the_state_that_ended_it():
    env = PointReachEnv(2, max_steps=50)
    env.reset(seed=0)
    env.pos[:] = env.goal - np.array([0.03, 0.0, 0.0], np.float32)  # 3 cm short: 2 rows of 1.5 cm
    chunk = np.zeros((2, 4, 6), np.float32)
    chunk[:, :2, 0] = 0.015
    chunk[1, 2:, 0] = -0.02  # env 1 moves away again within the chunk
    _, _, term, trunc, info = env.chunk_step(chunk)
    # success is judged at the chunk's end: env 0 ends there in success, env 1 left the goal again
    assert term.tolist() == [True, False] and episode_success(info, term, trunc).tolist() == [True, False]
    tracker = EpisodeTracker(2)
    tracker.update(np.array([1.0, 2.0]), np.array([False, True]), np.array([False, True]))
    tracker.update(np.array([1.0, 2.0]), np.array([True, False]), np.array([False, False]))
    assert tracker.finished == [(2.0, 1, True), (2.0, 2, False)]
    assert tracker.success_rate() == 0.5


class _FirstRowRight:
    """A 4-row chunk whose first row steps towards the goal and whose later rows drift 2 cm a row
    along x: right only if the policy looks again after the first row."""

    def predict_action_batch(self, obs, deterministic=True):
        to_goal = obs["state"][:, 3:6] / 10.0
        chunk = np.zeros((len(to_goal), 4, 6), np.float32)
        chunk[:, 0, :3] = np.clip(to_goal, -0.02, 0.02)
        chunk[:, 1:, 0] = 0.02
        return PolicyOutput(actions=chunk, raw_actions=torch.from_numpy(chunk))


def test_evaluate_with_a_receding_horizon_runs_each_chunks_first_rows_then_predicts_again():
    whole, first = _FirstRowRight(), _FirstRowRight()
    assert evaluate(PointReachEnv(8, seed=3), whole, 16) == 0.0  # the drift ends every chunk off the goal
    assert evaluate(PointReachEnv(8, seed=3), first, 16, execute_rows=1) == 1.0
    with pytest.raises(ValueError, match="execute_rows must be an int >= 1"):
        evaluate(PointReachEnv(2), first, 2, execute_rows=0)


def test_paired_comparison_counts_only_the_episodes_where_two_policies_differ():
    before = np.array([1, 1, 0, 0, 1, 0], bool)
    after = np.array([1, 0, 1, 1, 1, 0], bool)
    paired = compare_paired(before, after)
    assert (paired.wins, paired.losses, paired.episodes) == (2, 1, 6)
    assert paired.before == pytest.approx(0.5) and paired.after == pytest.approx(4 / 6)
    assert paired.p_value == 1.0  # 2 against 1 is what a coin does
    clear = compare_paired(np.zeros(40, bool), np.r_[np.ones(10, bool), np.zeros(30, bool)])
    assert clear.p_value == pytest.approx(2 / 2**10)  # ten wins, no loss
    assert "+10 / -0" in str(clear)
    with pytest.raises(ValueError, match="equal, non-empty"):
        compare_paired(before, after[:5])


class _Recording:
    """Acts with ``scale`` x the goal direction (0: stands still) and keeps every observation."""

    def __init__(self, scale):
        self.scale, self.seen = scale, []

    def predict_action_batch(self, obs, deterministic=True):
        self.seen.append(obs["state"].copy())
        act = np.zeros((len(obs["state"]), 1, 6), np.float32)
        act[:, 0, :3] = np.clip(self.scale * obs["state"][:, 3:6] / 10.0, -0.02, 0.02)
        return PolicyOutput(actions=act, raw_actions=torch.from_numpy(act))


def test_episode_outcomes_pair_two_policies_on_the_same_starts_when_episodes_run_to_the_time_limit():
    """A policy that reaches and one that stands still: different outcomes, the same episodes (every
    episode's first observation is the same for both), so ``compare_paired`` may pair them."""
    runs = {}
    for scale in (1.0, 0.0):
        env = PointReachEnv(4, max_steps=6, seed=3)
        env.terminate_on_success = False  # every episode runs to its time limit
        policy = _Recording(scale)
        runs[scale] = (episode_outcomes(env, policy, 12, seed=5), policy.seen)
    (reach, seen_reach), (still, seen_still) = runs[1.0], runs[0.0]
    assert reach.dtype == bool and reach.shape == still.shape == (12,)
    assert reach.all() and not still.any()
    starts = range(0, len(seen_reach), 6)  # each episode's first decision
    for t in starts:
        np.testing.assert_array_equal(seen_reach[t][:, 3:6], seen_still[t][:, 3:6])
    paired = compare_paired(still, reach)
    assert (paired.wins, paired.losses) == (12, 0) and paired.p_value < 0.001


def test_demo_chunks_stay_inside_their_episode():
    env = PointReachEnv(2, max_steps=5)
    demos = collect_demos(
        env, lambda o: env.expert_actions(), num_steps=12, chunk_size=3, only_successful=False
    )
    # a chunk's actions are masked past its episode's end; the first step of a chunk is always valid
    assert demos.mask[:, 0].all()
    assert demos.actions.shape[1:] == (3, 6) and len(demos) == demos.obs["state"].shape[0]
    assert (~demos.mask).any()
    np.testing.assert_array_equal(demos.actions[~demos.mask].numpy(), 0.0)


def test_ppo_learns_point_reach():
    env = PointReachEnv(16, seed=0)
    pol = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec)
    res = train_ppo(
        env,
        pol,
        PPOConfig(num_steps=32, minibatch_size=128),
        max_env_steps=60_000,
        seed=0,
        target_success=0.95,
        window=64,
    )
    assert res.reached, res.history[-1]
    assert evaluate(PointReachEnv(16, seed=7), pol, 64) >= 0.95


def test_ppo_with_action_chunks_learns_point_reach():
    env = PointReachEnv(16, seed=0)
    pol = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, chunk_size=2)
    res = train_ppo(
        env,
        pol,
        PPOConfig(num_steps=16, minibatch_size=128),
        max_env_steps=80_000,
        seed=0,
        target_success=0.9,
        window=64,
    )
    assert res.reached, res.history[-1]


def test_rlpd_with_demos_learns_faster_than_it_could_explore():
    """RLPD: half of every batch from expert demos -> success within a few hundred env steps."""
    env = PointReachEnv(4, seed=0)
    demo_env = PointReachEnv(8, seed=1)
    demos = collect_demos(demo_env, lambda o: demo_env.expert_actions(), 40, chunk_size=1)
    pol = policies.make(
        "mlp",
        action_spec=env.action_spec,
        obs_spec=env.obs_spec,
        squash=True,
        obs_norm=False,
        value_head=False,
        hidden=(64, 64),
        activation="relu",
    )
    buf = ReplayBuffer(10_000)
    a = pol.normalize_actions(demos.actions).flatten(1).clamp(-0.999, 0.999)
    s = demos.obs["state"]
    # next states of demo transitions: the point moves by the action (state = 10 * [pos, goal - pos])
    d = torch.cat([demos.actions[:, 0, :3], -demos.actions[:, 0, :3]], 1) * 10.0
    buf.add(state=s, action=a, reward=torch.zeros(len(s)), next_state=s + d, done=torch.zeros(len(s)))
    cfg = SACConfig.rlpd(num_critics=4, critic_hidden=(64, 64), batch_size=64, utd=1.0, lr=1e-3)
    res = train_sac(env, pol, cfg, max_env_steps=3000, seed=0, demos=buf, target_success=0.9, window=16)
    assert res.reached, res.history[-1]


def test_sft_then_grpo_groups_share_starts():
    env = PointReachEnv(4, seed=0)
    pol = policies.make(
        "mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, chunk_size=2, obs_norm=False
    )
    demos = collect_demos(env, lambda o: env.expert_actions(), 30, chunk_size=2)
    losses = train_sft(pol, demos, SFTConfig(epochs=5, batch_size=32))
    assert losses[-1] < losses[0]
    batch = collect_groups(env, pol, seed=3, cfg=GRPOConfig(group_size=3, max_decisions=5))
    # every repeat starts from the same 4 goals: the first decision's observations repeat G times
    first = batch.obs["state"].view(-1, 4, 6)
    assert torch.equal(first[0], first[5]) and torch.equal(first[0], first[10])
    assert batch.advantages.shape == batch.log_prob.shape == batch.mask.shape


def test_grpo_greedy_baseline_judges_each_sample_against_the_mean_action_from_its_start():
    """baseline="greedy" (self-critical): one more episode per start acts with the mean action; a
    sample that did as well as it gets no advantage, better positive, worse negative, and the round
    reports that episode's success (the policy evaluation scores) as greedy_success."""
    from rlinf_robot.algorithms.grpo import group_relative_advantages
    from rlinf_robot.algorithms.loops.grpo_loop import train_grpo

    adv = group_relative_advantages(
        torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]),
        baseline=torch.tensor([0.0, 0.0, 1.0]),
    )
    spread = np.std([1.0, 0.0, 1.0, 0.0])
    np.testing.assert_allclose(adv[0], [1 / spread, 0.0, 1 / spread], rtol=1e-5)
    assert torch.equal(adv[1], torch.zeros(3))  # every sample as the greedy episode: nothing to learn
    assert adv[2, 0] == adv[2, 1] == 0.0 and adv[2, 2] < 0.0
    with pytest.raises(ConfigError, match="grpo.baseline"):
        GRPOConfig(baseline="critic")
    with pytest.raises(ValueError, match="baseline must be"):
        group_relative_advantages(torch.zeros(3, 2), baseline=torch.zeros(2))

    env = PointReachEnv(6, seed=0)
    torch.manual_seed(0)
    pol = policies.make(
        "mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, chunk_size=2, obs_norm=False
    )
    train_sft(pol, collect_demos(env, lambda o: env.expert_actions(), 30, chunk_size=2), SFTConfig(epochs=20))
    cfg = GRPOConfig(group_size=4, max_decisions=15, reward="success", baseline="greedy")
    torch.manual_seed(1)
    batch = collect_groups(env, pol, seed=5, cfg=cfg)
    torch.manual_seed(1)
    group = collect_groups(env, pol, seed=5, cfg=GRPOConfig(group_size=4, max_decisions=15, reward="success"))
    # the greedy episode is a baseline only: the same sampled decisions as the group baseline's batch
    assert torch.equal(batch.raw_actions, group.raw_actions) and torch.equal(batch.mask, group.mask)
    assert batch.success_rate == group.success_rate and group.greedy_success is None
    greedy = env.num_envs * batch.greedy_success  # starts whose mean-action episode succeeded
    assert greedy == round(greedy) and 0 < greedy < env.num_envs, batch.greedy_success  # 3 of 6 here
    per_env = batch.advantages.view(-1, env.num_envs)  # [decisions, N]: column i is start i
    for i in range(env.num_envs):  # with a 0/1 outcome a start's samples sit on one side of its greedy one
        col = per_env[:, i]
        assert bool((col >= 0).all()) or bool((col <= 0).all()), col
    assert (per_env > 0).any() or (per_env < 0).any()
    logged = []
    train_grpo(env, pol, cfg, iterations=1, seed=0, log=logged.append)
    assert 0.0 <= logged[0]["greedy_success"] <= 1.0


def test_grpo_with_the_std_held_moves_only_the_mean():
    from rlinf_robot.algorithms.loops.grpo_loop import train_grpo

    env = PointReachEnv(4, seed=0)
    torch.manual_seed(0)
    pol = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, obs_norm=False)
    std0 = pol.log_std.detach().clone()
    mean0 = [p.detach().clone() for p in pol.actor.parameters()]
    cfg = GRPOConfig(group_size=4, max_decisions=8, epochs=2, lr=1e-2, reward="return", train_std=False)
    train_grpo(env, pol, cfg, iterations=2, seed=0)
    assert torch.equal(pol.log_std, std0)
    explore = GRPOConfig(group_size=4, max_decisions=8, lr=1e-2, reward="return", train_std=False,
                         explore_log_std=-1.5)  # fmt: skip
    train_grpo(env, pol, explore, iterations=1, seed=0)
    assert torch.all(pol.log_std == -1.5)  # set, then held
    with pytest.raises(ConfigError, match="explore_log_std"):
        GRPOConfig(explore_log_std=-3.0)  # the std trained: nothing to set
    assert any(not torch.equal(p, q) for p, q in zip(pol.actor.parameters(), mean0, strict=True))
    train_grpo(
        env, pol, GRPOConfig(group_size=4, max_decisions=8, lr=1e-2, reward="return"), iterations=1, seed=1
    )
    assert not torch.equal(pol.log_std, std0)  # the default trains it
    squashed = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, squash=True)
    with pytest.raises(ConfigError, match="no std parameter to hold"):
        train_grpo(env, squashed, cfg, iterations=1)


def test_grpo_per_dimension_ratios_start_at_one_and_sum_to_the_chunks():
    from rlinf_robot.algorithms.loops.grpo_loop import grpo_update

    env = PointReachEnv(8, seed=0)
    torch.manual_seed(0)
    pol = policies.make(
        "mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, chunk_size=2, obs_norm=False
    )
    cfg = GRPOConfig(
        group_size=4, max_decisions=5, epochs=1, minibatch_size=4096, reward="return", ratio="dim"
    )
    batch = collect_groups(env, pol, seed=1, cfg=cfg)
    out = pol({"obs": batch.obs, "raw_actions": batch.raw_actions})
    assert out["dim_log_prob"].shape == (len(batch.log_prob), 2 * env.action_spec.shape[0])
    torch.testing.assert_close(out["dim_log_prob"].sum(-1), out["log_prob"])
    torch.testing.assert_close(out["log_prob"], batch.log_prob)  # what the policy acted with
    opt = torch.optim.Adam(pol.parameters(), lr=1e-3)
    stats = grpo_update(pol, None, opt, batch, cfg)  # one step: its stats are from before it
    assert stats["decisions"] > 0 and stats["approx_kl"] < 1e-6 and stats["clip_fraction"] == 0.0, stats
    with pytest.raises(ConfigError, match="grpo.ratio"):
        GRPOConfig(ratio="token")


def test_a_grpo_minibatch_that_is_not_finite_is_skipped_and_never_reaches_the_weights():
    """A far-tail sample's log-ratio is bounded (e^20, not an overflow), and a batch whose loss is NaN
    anyway (here: a NaN behaviour log-prob, as a corrupted rollout would bring) is skipped and
    counted; the weights stay finite and untouched. Seen: lr 5e-5 on the pixel VLA put NaN in
    every weight at the second round, and the env refused the next actions."""
    from rlinf_robot.algorithms.grpo import grpo_loss
    from rlinf_robot.algorithms.loops.grpo_loop import grpo_update

    far = torch.tensor([0.0, 0.0], requires_grad=True)
    loss, _ = grpo_loss(far, torch.tensor([-200.0, 0.0]), torch.tensor([-1.0, 1.0]),
                        ref_log_prob=torch.tensor([150.0, 0.0]), kl_coef=0.1)  # fmt: skip
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(far.grad).all()

    env = PointReachEnv(8, seed=0)
    torch.manual_seed(0)
    pol = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, obs_norm=False)
    cfg = GRPOConfig(group_size=4, max_decisions=5, epochs=2, minibatch_size=4096, reward="return")
    batch = collect_groups(env, pol, seed=1, cfg=cfg)
    batch.log_prob[:] = float("nan")
    before = [p.detach().clone() for p in pol.parameters()]
    stats = grpo_update(pol, None, torch.optim.Adam(pol.parameters(), lr=1e-2), batch, cfg)
    assert stats["decisions"] > 0 and stats["nonfinite_skipped"] == 2, stats  # one minibatch x 2 epochs
    assert all(torch.equal(p, q) for p, q in zip(pol.parameters(), before, strict=True))


def test_grpo_closed_form_kl_pulls_a_moved_mean_back_to_the_reference():
    """With zero advantages only the KL term acts: the closed-form anchor's gradient takes the
    moved mean straight back toward the reference's. A head without a log-std output is named."""
    import copy

    from rlinf_robot.algorithms.loops.grpo_loop import grpo_update

    env = PointReachEnv(8, seed=0)
    torch.manual_seed(0)
    ref = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, obs_norm=False)
    cfg = GRPOConfig(group_size=2, max_decisions=5, epochs=5, minibatch_size=4096, reward="return",
                     kl_coef=1.0, kl="gaussian", ratio="dim", train_std=False)  # fmt: skip
    batch = collect_groups(env, ref, seed=1, cfg=cfg)
    batch.advantages[:] = 1e-9  # kept (non-zero) but no pull of its own
    pol = copy.deepcopy(ref)
    with torch.no_grad():
        pol.actor[-1].bias.add_(0.05)
    gap = lambda: (pol(batch.__dict__)["mean"] - ref(batch.__dict__)["mean"]).abs().mean().item()  # noqa: E731
    before = gap()
    opt = torch.optim.Adam([p for p in pol.parameters() if p is not pol.log_std], lr=1e-3)
    stats = grpo_update(pol, ref, opt, batch, cfg)
    assert stats["kl_ref"] > 0 and gap() < 0.8 * before, (before, gap(), stats)
    squashed = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, squash=True)
    with pytest.raises(ConfigError, match="kl='gaussian' needs a Gaussian head"):
        grpo_update(squashed, squashed, torch.optim.Adam(squashed.parameters()), batch, cfg)
    with pytest.raises(ConfigError, match="grpo.kl"):
        GRPOConfig(kl="k2")


def test_grpo_progress_outcome_ranks_failures_by_how_close_they_ended_below_any_success():
    from rlinf_robot.algorithms.grpo import group_relative_advantages
    from rlinf_robot.algorithms.loops.grpo_loop import OUTCOMES

    won = np.array([True, False, False, True])
    ret = np.array([3.0, 20.0, 5.0, 1.0])  # the slow failure summed the most reward
    last = np.array([0.9, 0.2, 0.8, 0.95])
    score = OUTCOMES["progress"](won, ret, last)
    np.testing.assert_allclose(score, [1.0, 0.1, 0.4, 1.0])
    adv = group_relative_advantages(torch.as_tensor(score)[None])[0]
    assert adv[0] == adv[3] > adv[2] > adv[1]  # both wins alike, the nearer failure above the farther
    assert OUTCOMES["return"](won, ret, last)[1] == 20.0  # what "progress" is there to avoid
    with pytest.raises(ConfigError, match="grpo.reward"):
        GRPOConfig(reward="dense")


def test_grpo_margin_outcome_also_ranks_successes_by_how_well_they_ended():
    from rlinf_robot.algorithms.grpo import group_relative_advantages
    from rlinf_robot.algorithms.loops.grpo_loop import OUTCOMES

    won = np.array([True, True, True, True])  # a group "progress" cannot rank: all succeeded
    last = np.array([0.76, 0.99, 0.90, 0.80])
    assert torch.all(
        group_relative_advantages(torch.as_tensor(OUTCOMES["progress"](won, won, last))[None]) == 0
    )
    adv = group_relative_advantages(torch.as_tensor(OUTCOMES["margin"](won, won, last))[None])[0]
    assert adv[1] > adv[2] > adv[3] > adv[0]  # the most centred success first
    mixed = OUTCOMES["margin"](np.array([True, False]), np.zeros(2), np.array([0.0, 1.0]))
    assert mixed[0] > mixed[1]  # the worst success still above the best failure


def test_sft_cosine_schedule_takes_the_rate_from_lr_to_zero():
    env = PointReachEnv(4, seed=0)
    pol = policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, obs_norm=False)
    demos = collect_demos(env, lambda o: env.expert_actions(), 30, chunk_size=1)
    rows = []
    losses = train_sft(
        pol, demos, SFTConfig(epochs=6, batch_size=16, lr=1e-2, lr_schedule="cosine"), log=rows.append
    )
    rates = [r["lr"] for r in rows]
    assert rates == sorted(rates, reverse=True) and rates[0] > 0.8e-2 and rates[-1] < 0.05e-2, rates
    assert losses[-1] < losses[0]
    flat = []
    train_sft(pol, demos, SFTConfig(epochs=2, batch_size=16, lr=1e-2), log=flat.append)
    assert [r["lr"] for r in flat] == [1e-2, 1e-2]
    with pytest.raises(ConfigError, match="sft.lr_schedule"):
        SFTConfig(lr_schedule="linear-ish")


def test_loop_config_errors():
    with pytest.raises(ConfigError, match="num_min"):
        SACConfig(num_critics=2, num_min=3)
    with pytest.raises(ConfigError, match="num_steps"):
        PPOConfig(num_steps=0)


def test_random_shift_moves_each_image_by_its_own_offset_and_repeats_the_edge():
    from rlinf_robot.algorithms.loops.sft_loop import random_shift

    img = torch.zeros(64, 12, 12, 3, dtype=torch.uint8)
    img[:, 6, 6] = 255  # one lit pixel in the middle of every image
    out = random_shift(img, 2, torch.Generator().manual_seed(0))
    assert out.dtype == torch.uint8 and out.shape == img.shape
    where = [tuple(int(i) for i in torch.nonzero(o[..., 0])[0]) for o in out]
    assert all((o[..., 0] > 0).sum() == 1 for o in out)  # moved, not blurred or duplicated
    assert all(abs(r - 6) <= 2 and abs(c - 6) <= 2 for r, c in where)
    assert len(set(where)) > 10  # per-sample offsets, not one for the batch
    edge = torch.arange(12, dtype=torch.uint8).view(1, 12, 1, 1).expand(4, 12, 12, 3)
    shifted = random_shift(edge, 3, torch.Generator().manual_seed(1))
    assert set(shifted.unique().tolist()) <= set(range(12))  # what comes in is the edge row's value
    with pytest.raises(ConfigError, match="sft.image_shift"):
        SFTConfig(image_shift=-1)
