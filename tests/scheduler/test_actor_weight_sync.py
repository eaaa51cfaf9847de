"""Weight sync from a trained FSDP2 actor group (2 ranks, gloo) to rollout workers over the object
store: after real PPO steps, every rollout rank holds exactly the actor's gathered full state dict."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from rlinf_robot.envs.spec import ActionSpec  # noqa: E402
from rlinf_robot.scheduler import GroupSpec, WorkerGroup, make_plan  # noqa: E402
from rlinf_robot.scheduler.weight_sync import push_weights  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = ActionSpec("ee_delta", (6,), np.full(6, -0.02, np.float32), np.full(6, 0.02, np.float32), 20.0)
POLICY_KW = {"hidden": (16, 16), "chunk_size": 2}
B = 8


def ppo_batch(step: int) -> dict:
    """A PPO global batch sampled from a fresh copy of the policy (every key the objective reads)."""
    import policies

    torch.manual_seed(0)
    policy = policies.make("mlp", action_spec=SPEC, state_dim=5, **POLICY_KW)
    g = torch.Generator().manual_seed(50 + step)
    obs = {"state": torch.randn(B, 5, generator=g), "images": {}, "instruction": []}
    with torch.no_grad():
        pred = policy.predict_action_batch(obs)
    adv = torch.randn(B, generator=g)
    return {
        "obs": obs,
        "raw_actions": pred.raw_actions,
        "log_prob": pred.log_prob + 0.1 * torch.randn(B, generator=g),
        "advantages": (adv - adv.mean()) / adv.std(),
        "returns": pred.value + torch.randn(B, generator=g),
    }


@pytest.fixture(scope="module")
def groups(cluster):
    from rlinf_robot.workers.actor import ActorWorker
    from rlinf_robot.workers.rollout import RolloutWorker
    from rlinf_robot.workers.sim_env import action_spec_to_dict

    # One plan for both groups: CPU shares shrink so 4 processes fit the 2-CPU cluster.
    plan = make_plan(
        "disaggregated", cluster.resource_spec(), [GroupSpec("actor", 2), GroupSpec("rollout", 2)]
    )
    reservation = cluster.reserve(plan, timeout_s=30)
    launched = []
    try:
        actor_kw = dict(
            policy="mlp",
            policy_cfg={"action_spec": SPEC, "state_dim": 5, **POLICY_KW},
            objective="ppo",
            trainer={"lr": 1e-2, "micro_batch_size": 2, "strategy": "fsdp"},
            seed=0,
        )
        launched.append(WorkerGroup.launch(ActorWorker, "actor", reservation, kwargs=actor_kw))
        rollout_kw = dict(action_spec=action_spec_to_dict(SPEC), state_dim=5, policy_kwargs=POLICY_KW, seed=0)
        launched.append(WorkerGroup.launch(RolloutWorker, "rollout", reservation, kwargs=rollout_kw))
        yield launched
    finally:
        for g in launched:
            g.shutdown()
        reservation.release()


def _assert_same(got: dict, want: dict, who: str) -> None:
    assert got.keys() == want.keys(), who
    for k in want:
        np.testing.assert_array_equal(got[k], want[k].numpy(), err_msg=f"{who}: {k}")


def test_push_after_training_gives_rollouts_the_actors_full_state(groups):
    actor, rollout = groups
    info = actor.call("setup").wait(120)
    assert [i["strategy"] for i in info] == ["fsdp", "fsdp"]
    initial = rollout.call_rank(0, "numpy_state").wait_one(60)
    previous = None
    for version in (1, 2):
        actor.call("train_step", ppo_batch(version)).wait(120)
        full = actor.call("full_state_dict").wait(120)[0]  # rank 0 holds the gathered tensors
        assert actor.call("gather_weights").wait(120) == [version, version]
        # Training moved every layer (the value head too) away from what the rollouts hold.
        stale = previous or initial
        assert all(
            not np.array_equal(stale[k], full[k].numpy()) for k in full if "critic" in k or "actor" in k
        )
        assert push_weights(actor, rollout, version) == [version, version]
        states = rollout.call("numpy_state").wait(60)
        for rank, state in enumerate(states):
            _assert_same(state, full, f"v{version} rollout[{rank}]")
        previous = states[0]
