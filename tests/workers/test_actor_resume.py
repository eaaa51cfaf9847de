"""Resume is exact: a checkpointed ActorWorker, reloaded in a fresh process, makes the next update
bit for bit like the one that never stopped (same batch, same seed) - the property ``--resume``
relies on. Hybrid PPO's objective (``decoupled_ppo`` with value and entropy terms), real Ray."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlinf_robot.envs.spec import ActionSpec

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SPEC = ActionSpec("ee_delta", (6,), np.full(6, -0.02, np.float32), np.full(6, 0.02, np.float32), 20.0)
POLICY = {"action_spec": SPEC, "state_dim": 5, "hidden": (16, 16)}
OBJ = {"clip": 0.2, "rho_max": 1.0, "vf_coef": 0.5, "ent_coef": 0.01}


def batch(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    n = 64
    return {
        "obs": {"state": torch.randn(n, 5, generator=g), "images": {}, "instruction": []},
        "raw_actions": torch.randn(n, 1, 6, generator=g),
        "behaviour_log_prob": torch.randn(n, generator=g) - 5,
        "proximal_log_prob": torch.randn(n, generator=g) - 5,
        "value": torch.randn(n, generator=g),
        "advantages": torch.randn(n, generator=g),
        "returns": torch.randn(n, generator=g),
    }


def test_the_update_after_a_resume_is_bit_exact(tmp_path):
    pytest.importorskip("ray")
    from rlinf_robot.scheduler import Cluster, WorkerGroup
    from rlinf_robot.workers.actor import ActorWorker

    kwargs = dict(
        policy="mlp",
        policy_cfg=POLICY,
        objective="decoupled_ppo",
        objective_cfg=OBJ,
        trainer={"lr": 1e-3, "max_grad_norm": 0.5},
        seed=0,
    )
    with Cluster(num_cpus=2, num_gpus=0, namespace="rlinf_resume_test", log_to_driver=False) as cluster:
        a = WorkerGroup.spawn(ActorWorker, "actor_a", cluster, num_ranks=1, kwargs=kwargs)
        try:
            for k in range(3):
                a.call("train_epochs", batch(k), 2, 16, 100 + k).wait(120)
            a.call("save_checkpoint", str(tmp_path / "ckpt")).wait(120)
            a.call("train_epochs", batch(3), 2, 16, 103).wait(120)
            straight = a.call("full_state_dict").wait(120)[0]
        finally:
            a.shutdown()
        b = WorkerGroup.spawn(ActorWorker, "actor_b", cluster, num_ranks=1, kwargs={**kwargs, "seed": 7})
        try:
            assert b.call("load_checkpoint", str(tmp_path / "ckpt")).wait(120) == [3 * 2 * 4]
            stats = b.call("train_epochs", batch(3), 2, 16, 103).wait(120)[0]
            resumed = b.call("full_state_dict").wait(120)[0]
        finally:
            b.shutdown()
    assert stats["updates"] == 8 and stats["epochs"] == 2
    assert straight.keys() == resumed.keys()
    for key in straight:
        assert torch.equal(straight[key], resumed[key]), key
