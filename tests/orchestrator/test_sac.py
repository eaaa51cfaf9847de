"""The off-policy job recipe (algorithm=sac / rlpd): transitions from sim rollouts and real
episodes, the real share of each batch, the learner's checkpoint round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlinf_robot.algorithms.buffers import ReplayBuffer
from rlinf_robot.algorithms.rlpd import share_sample
from rlinf_robot.errors import ConfigError
from rlinf_robot.orchestrator.recipe import make_recipe
from rlinf_robot.orchestrator.sac import SACSettings
from rlinf_robot.workers.sac_actor import (
    SACActorWorker,
    transitions_from_episode,
    transitions_from_trajectory,
)

from .test_batch import EE_SPEC, fake_episode, fake_traj


def test_sim_transitions_bootstrap_from_the_state_that_ended_an_episode():
    traj = fake_traj(T=4, N=3)
    traj["final_states"][1, 0] = 42.0  # env 0 truncated at t=1
    traj["terminated"][2, 1] = True
    traj["final_states"][2, 1] = -7.0
    tr = transitions_from_trajectory(traj)
    assert tr["state"].shape == (12, 5) and tr["action"].shape == (12, 6)
    nxt = tr["next_state"].reshape(4, 3, 5)
    assert np.all(nxt[1, 0] == 42.0) and np.all(nxt[2, 1] == -7.0)
    np.testing.assert_array_equal(nxt[0, 2], traj["states"][1, 2])
    done = tr["done"].reshape(4, 3)
    assert done[2, 1] == 1.0 and done[1, 0] == 0.0  # a truncation bootstraps, a termination stops
    assert done.sum() == 1


def test_real_transitions_end_on_the_final_state():
    ep = fake_episode(version=3, steps=5)
    ep["states"] = np.arange(6 * 5, dtype=np.float32).reshape(6, 5)
    ep["final_state"] = np.full(5, 99.0, np.float32)
    tr = transitions_from_episode(ep)
    assert len(tr["reward"]) == 5
    np.testing.assert_array_equal(tr["next_state"][:4], ep["states"][1:5])
    assert np.all(tr["next_state"][4] == 99.0)


def test_share_sample_takes_the_configured_share_from_the_second_replay():
    sim, real = ReplayBuffer(1000), ReplayBuffer(1000)
    sim.add(x=torch.zeros(500, 1))
    gen = torch.Generator().manual_seed(0)
    batch, n = share_sample(sim, real, 256, 0.25, gen)
    assert n == 0 and float(batch["x"].sum()) == 0  # nothing real yet: all sim
    real.add(x=torch.ones(10, 1))
    batch, n = share_sample(sim, real, 256, 0.25, gen)
    assert n == 64 and float(batch["x"].sum()) == 64 and len(batch["x"]) == 256


def test_settings_name_the_bad_key_or_value():
    with pytest.raises(ConfigError, match="unknown key.*utdd"):
        make_recipe({"name": "sac", "utdd": 2})
    with pytest.raises(ConfigError, match="num_min"):
        SACSettings(num_critics=2, num_min=3)
    with pytest.raises(ConfigError, match="algorithm.name 'sacc' unknown"):
        make_recipe({"name": "sacc"})


def _worker(seed=0):
    return SACActorWorker(
        "mlp",
        {"action_spec": EE_SPEC, "state_dim": 5, "squash": True, "value_head": False},
        {"batch_size": 32, "num_critics": 4, "num_min": 2, "layer_norm": True, "actor_delay": 2},
        seed=seed,
    )


def _fill(w, kind, n, seed):
    rng = np.random.default_rng(seed)
    w.add(
        {
            "state": rng.normal(size=(n, 5)),
            "action": rng.uniform(-1, 1, (n, 6)),
            "reward": rng.normal(size=n),
            "next_state": rng.normal(size=(n, 5)),
            "done": np.zeros(n),
        },
        kind,
    )


def test_the_learner_trains_with_the_real_share_and_its_schedule_and_resumes_bit_exactly(tmp_path):
    w = _worker()
    with pytest.raises(ValueError, match="squash"):
        SACActorWorker("mlp", {"action_spec": EE_SPEC, "state_dim": 5}, {})
    _fill(w, "sim", 200, 0)
    _fill(w, "real", 40, 1)
    stats = w.train(10, 0.5)
    assert stats["real_share"] == pytest.approx(0.5)
    assert stats["total_critic_updates"] == 10 and stats["total_actor_updates"] == 5  # actor_delay 2
    w.save_checkpoint(str(tmp_path / "ckpt"))
    assert not list(tmp_path.glob("*.tmp"))
    other = _worker(seed=1)
    _fill(other, "sim", 200, 0)
    _fill(other, "real", 40, 1)
    assert other.load_checkpoint(str(tmp_path / "ckpt")) == 10
    assert other.parameters_digest() == w.parameters_digest()
    # the same next update on the same data and sampling seed: bit-exact
    w.train(3, 0.5, seed=7)
    other.train(3, 0.5, seed=7)
    assert other.parameters_digest() == w.parameters_digest()
    assert float(other.learner.log_alpha.detach()) == float(w.learner.log_alpha.detach())


def test_warm_start_copies_the_newest_sim_transitions_into_an_empty_real_replay():
    w = _worker()
    _fill(w, "sim", 300, 0)
    newest = w.replays["sim"].latest(100)
    assert w.warm_start(100) == {"sim": 300, "real": 100, "demo": 0, "warm": 100}
    torch.testing.assert_close(w.replays["real"].latest(100), newest)
    assert w.warm_start(100) == {
        "sim": 300,
        "real": 100,
        "demo": 0,
        "warm": 0,
    }  # not empty any more: left as it is


def test_interventions_get_their_share_of_every_batch_once_there_are_any():
    """Teleop: the transitions an operator took over sit in the ``demo`` replay (and in ``real``),
    and ``demo_share`` of each batch is drawn from it; none while it is empty."""
    w = _worker()
    _fill(w, "sim", 200, 0)
    _fill(w, "real", 40, 1)
    stats = w.train(2, 0.25, seed=0, demo_share=0.25)
    assert stats["demo_share"] == 0.0 and stats["real_share"] == pytest.approx(0.25)
    _fill(w, "demo", 8, 2)
    stats = w.train(4, 0.25, seed=0, demo_share=0.25)
    batch = w.learner.cfg.batch_size
    assert stats["demo_share"] == pytest.approx(round(0.25 * batch) / batch)
    assert stats["demo_replay"] == 8 and stats["real_replay"] == 40
