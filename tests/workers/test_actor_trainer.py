"""ActorTrainer under torch.distributed (gloo, 2 ranks on 127.0.0.1): FSDP2 and DDP give the 1-rank
result on the same global batch, with gradient accumulation; checkpoints resume exactly."""

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import policies
from rlinf_robot.envs.spec import ActionSpec, ObsSpec
from rlinf_robot.errors import ConfigError
from rlinf_robot.workers.actor import ActorTrainer, TrainerConfig, shard_batch
from rlinf_robot.workers.distributed import spawn

SPEC = ActionSpec("ee_delta", (6,), np.full(6, -0.02, np.float32), np.full(6, 0.02, np.float32), 20.0)
OBS = ObsSpec((5,), {"front": (32, 32, 3)})
B, STEPS = 16, 3


def make_policy():
    """tiny_vla, so FSDP2 shards real transformer blocks (its ``_no_split_modules``)."""
    torch.manual_seed(0)
    return policies.make(
        "tiny_vla",
        action_spec=SPEC,
        obs_spec=OBS,
        chunk_size=2,
        hidden_size=32,
        num_heads=2,
        num_layers=2,
        image_size=32,
        max_text_len=16,
    )


def global_batch(step: int) -> dict:
    g = torch.Generator().manual_seed(100 + step)
    words = ["reach", "push the block", "lift", "go"]
    return {
        "obs": {
            "state": torch.randn(B, 5, generator=g),
            "images": {"front": torch.randint(0, 256, (B, 32, 32, 3), generator=g, dtype=torch.uint8)},
            "instruction": [words[i % 4] for i in range(B)],
        },
        "actions": (torch.rand(B, 2, 6, generator=g) * 0.04 - 0.02),
        "mask": torch.ones(B, 2),
    }


def make_trainer(micro, strategy="none"):
    cfg = TrainerConfig(lr=1e-2, micro_batch_size=micro, strategy=strategy, max_grad_norm=0.5)
    return ActorTrainer(make_policy(), "sft", cfg, objective_cfg={"kind": "mse"})


def _rank_main(rank: int, world: int, out_dir: str) -> None:
    """Runs in each spawned rank: FSDP2 then DDP on the same global batches."""
    torch.set_num_threads(1)
    out = Path(out_dir)
    for strategy in ("fsdp", "ddp"):
        trainer = make_trainer(micro=4, strategy=strategy)  # 8 rows per rank -> 2 micro-batches
        losses = []
        for step in range(STEPS):
            losses.append(trainer.train_step(shard_batch(global_batch(step), rank, world))["loss"])
            if step == 1 and strategy == "fsdp":
                trainer.save_checkpoint(out / "ckpt")
        model_sd, _ = trainer.full_state()
        if rank == 0:
            save_file({k: v.contiguous() for k, v in model_sd.items()}, str(out / f"{strategy}.safetensors"))
            (out / f"{strategy}_losses.txt").write_text(" ".join(map(str, losses)))


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    spawn(_rank_main, 2, str(out), timeout_s=240)
    return out


@pytest.fixture(scope="module")
def reference():
    """One process, the whole global batch at once (no accumulation)."""
    torch.set_num_threads(1)
    trainer = make_trainer(micro=None)
    losses, states = [], []
    for step in range(STEPS):
        losses.append(trainer.train_step(global_batch(step))["loss"])
        states.append({k: v.clone() for k, v in trainer.policy.state_dict().items()})
    return losses, states


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["fsdp", "ddp"])
def test_two_ranks_equal_one_rank(two_rank_run, reference, strategy):
    losses, states = reference
    got = load_file(str(two_rank_run / f"{strategy}.safetensors"))
    final = states[-1]
    assert got.keys() == {k for k in final if not k.startswith("_act")}
    moved = max((final[k] - states[0][k]).abs().max().item() for k in got)
    assert moved > 1e-3  # training really changed the weights
    for k, v in got.items():
        torch.testing.assert_close(v, final[k], atol=2e-5, rtol=1e-4, msg=k)
    dist_losses = [float(x) for x in (two_rank_run / f"{strategy}_losses.txt").read_text().split()]
    np.testing.assert_allclose(dist_losses, losses, rtol=1e-4)


def test_gradient_accumulation_equals_full_batch(reference):
    losses, states = reference
    trainer = make_trainer(micro=3)  # 16 rows -> micro-batches 3,3,3,3,3,1 (uneven on purpose)
    for step in range(STEPS):
        trainer.train_step(global_batch(step))
    for k, v in trainer.policy.state_dict().items():
        torch.testing.assert_close(v, states[-1][k], atol=2e-5, rtol=1e-4, msg=k)


@pytest.mark.slow
def test_checkpoint_from_two_ranks_resumes_on_one(two_rank_run, reference):
    losses, states = reference
    trainer = make_trainer(micro=None)
    trainer.load_checkpoint(two_rank_run / "ckpt")
    assert trainer.step == 2
    for k, v in trainer.policy.state_dict().items():
        torch.testing.assert_close(v, states[1][k], atol=2e-5, rtol=1e-4, msg=k)
    trainer.train_step(global_batch(2))  # the optimizer's moments came back too
    for k, v in trainer.policy.state_dict().items():
        torch.testing.assert_close(v, states[2][k], atol=2e-5, rtol=1e-4, msg=k)


def test_checkpoint_round_trip_single_process(tmp_path):
    torch.set_num_threads(1)
    a = make_trainer(micro=None)
    a.train_step(global_batch(0))
    a.save_checkpoint(tmp_path / "c")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [
        "model.safetensors",
        "optimizer.safetensors",
        "trainer.json",
    ]
    b = make_trainer(micro=None)
    b.load_checkpoint(tmp_path / "c")
    named_b = dict(b.policy.named_parameters())
    for name, pa in a.policy.named_parameters():
        sa, sb = a.optimizer.state.get(pa, {}), b.optimizer.state.get(named_b[name], {})
        assert sa.keys() == sb.keys(), name
        assert all(torch.equal(sa[k], sb[k]) for k in sa), name
    a.train_step(global_batch(1))
    b.train_step(global_batch(1))
    for k, v in a.policy.state_dict().items():
        assert torch.equal(v, b.policy.state_dict()[k]), k


def test_strategy_needs_a_process_group():
    with pytest.raises(ConfigError, match="process group"):
        make_trainer(micro=None, strategy="fsdp")
    with pytest.raises(ConfigError, match="strategy"):
        TrainerConfig(strategy="zero3")
