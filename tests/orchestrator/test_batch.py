"""Hybrid PPO's batch assembly, the source-tagged buffer and the real replay on disk."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.orchestrator import ppo
from rlinf_robot.orchestrator.buffer import EpisodeStore, SourceBuffer

S = ppo.PPOSettings(gamma=0.9, lam=1.0)


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
