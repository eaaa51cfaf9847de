"""ActorWorker as a scheduler WorkerGroup on a local Ray cluster (127.0.0.1): 2 ranks, FSDP2 on
gloo, one global batch per step; the result equals one in-process trainer's."""

import time

import numpy as np
import pytest
import torch

from rlinf_robot.envs.spec import ActionSpec

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SPEC = ActionSpec("ee_delta", (6,), np.full(6, -0.02, np.float32), np.full(6, 0.02, np.float32), 20.0)
POLICY_CFG = {"action_spec": SPEC, "state_dim": 5, "hidden": (16, 16), "chunk_size": 2, "obs_norm": False}
TRAINER = {"lr": 1e-2, "micro_batch_size": 2, "max_grad_norm": 0.5}


def global_batch(step: int) -> dict:
    g = torch.Generator().manual_seed(step)
    return {
        "obs": {"state": torch.randn(8, 5, generator=g), "images": {}, "instruction": []},
        "actions": torch.rand(8, 2, 6, generator=g) * 0.04 - 0.02,
    }


def test_actor_worker_group_trains_like_one_process():
    pytest.importorskip("ray")
    import policies
    from rlinf_robot.scheduler import Cluster, WorkerGroup
    from rlinf_robot.workers.actor import ActorTrainer, ActorWorker, TrainerConfig

    torch.manual_seed(0)
    ref = ActorTrainer(
        policies.make("mlp", **POLICY_CFG),
        "sft",
        TrainerConfig(**{**TRAINER, "micro_batch_size": None}),
        {"kind": "mse"},
    )
    for step in range(2):
        ref.train_step(global_batch(step))

    with Cluster(num_cpus=2, num_gpus=0, namespace="rlinf_actor_test", log_to_driver=False) as cluster:
        group = WorkerGroup.spawn(
            ActorWorker,
            "actor",
            cluster,
            num_ranks=2,
            kwargs=dict(
                policy="mlp",
                policy_cfg=POLICY_CFG,
                objective="sft",
                objective_cfg={"kind": "mse"},
                trainer=TRAINER,
                seed=0,
            ),
        )
        try:
            info = group.call("setup").wait(120)
            assert [i["rank"] for i in info] == [0, 1] and {i["strategy"] for i in info} == {"fsdp"}
            for step in range(2):
                stats = group.call("train_step", global_batch(step)).wait(120)
                assert stats[0]["loss"] == pytest.approx(stats[1]["loss"])  # global mean on both ranks
            weights = group.call("full_state_dict").wait(120)[0]
            assert group.call("gather_weights").wait(120) == [2, 2]
        finally:
            group.shutdown()
        deadline = time.monotonic() + 15
        while cluster.live_actors() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cluster.live_actors() == []
    for k, v in ref.policy.state_dict().items():
        torch.testing.assert_close(weights[k], v, atol=2e-5, rtol=1e-4, msg=k)
