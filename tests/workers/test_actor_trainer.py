"""ActorTrainer under torch.distributed (gloo, 2 ranks on 127.0.0.1): FSDP2 and DDP give the 1-rank
result on the same global batch, with gradient accumulation, for behaviour cloning and for the RL
objectives (PPO, GRPO, decoupled PPO); DDP syncs once per step; checkpoints resume exactly.

One ``spawn`` runs every distributed case (a module fixture), the 1-rank references run here.
"""

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
STRATEGIES = ("fsdp", "ddp")


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


def make_trainer(micro, strategy="none", max_grad_norm=0.5):
    cfg = TrainerConfig(lr=1e-2, micro_batch_size=micro, strategy=strategy, max_grad_norm=max_grad_norm)
    return ActorTrainer(make_policy(), "sft", cfg, objective_cfg={"kind": "mse"})


# ------------------------------------------------------------------ RL objectives
def make_mlp():
    torch.manual_seed(0)
    return policies.make("mlp", action_spec=SPEC, state_dim=5, hidden=(16, 16), chunk_size=2)


#: objective -> (policy maker, objective config). The MLP's value head is unused by decoupled PPO
#: and the tiny VLA's by GRPO: DDP must still reduce (find_unused_parameters).
RL = {
    "ppo": (make_mlp, {"clip": 0.2, "vf_coef": 0.5, "ent_coef": 0.01, "value_clip": 0.2}),
    "decoupled_ppo": (make_mlp, {"clip": 0.2, "rho_max": 1.0}),
    "grpo": (make_policy, {"clip": 0.2, "kl_coef": 0.1}),
}
RL_STEPS = 2


def rl_batches(objective: str) -> list[dict]:
    """Global batches sampled from the initial policy, with old / behaviour / reference log-probs
    perturbed so ratios spread over the clip range and importance weights get truncated."""
    make, _ = RL[objective]
    policy = make()
    out = []
    for step in range(RL_STEPS):
        obs = global_batch(step)["obs"]
        g = torch.Generator().manual_seed(300 + step)
        torch.manual_seed(400 + step)  # the policy samples with the global generator
        with torch.no_grad():
            pred = policy.predict_action_batch(obs)

        def near(x, scale=0.3, g=g):
            return x + scale * torch.randn(x.shape, generator=g)

        adv = torch.randn(B, generator=g)
        batch = {"obs": obs, "raw_actions": pred.raw_actions, "advantages": (adv - adv.mean()) / adv.std()}
        if objective == "ppo":
            batch.update(
                log_prob=near(pred.log_prob), returns=near(pred.value, 1.0), value=near(pred.value, 0.1)
            )
        elif objective == "decoupled_ppo":
            batch.update(proximal_log_prob=near(pred.log_prob), behaviour_log_prob=near(pred.log_prob))
        else:
            batch.update(log_prob=near(pred.log_prob), ref_log_prob=near(pred.log_prob))
        out.append(batch)
    return out


def make_rl_trainer(objective: str, micro, strategy="none", objective_fn=None):
    make, cfg = RL[objective]
    tcfg = TrainerConfig(lr=1e-2, micro_batch_size=micro, strategy=strategy, max_grad_norm=0.5)
    return ActorTrainer(make(), objective_fn or objective, tcfg, objective_cfg=cfg)


class _CountingObjective:
    """The real objective, counting the micro-batches it has seen (the DDP sync check reads it)."""

    def __init__(self, name: str):
        from rlinf_robot.algorithms import get_objective

        self.fn, self.calls = get_objective(name), 0

    def __call__(self, policy, batch, **cfg):
        self.calls += 1
        return self.fn(policy, batch, **cfg)


# ------------------------------------------------------------------ the distributed run
def _save_weights(trainer: ActorTrainer, rank: int, out: Path, tag: str) -> None:
    """Rank 0 writes the gathered full state; under DDP every rank also writes its own replica."""
    model_sd, _ = trainer.full_state()
    if rank == 0:
        save_file({k: v.contiguous() for k, v in model_sd.items()}, str(out / f"{tag}.safetensors"))
    if not trainer.parallel.sharded:
        local = {k: v.detach().clone().contiguous() for k, v in trainer.policy.state_dict().items()}
        save_file(local, str(out / f"{tag}_rank{rank}.safetensors"))


def _rank_main(rank: int, world: int, out_dir: str, rl: dict) -> None:
    """Runs in each spawned rank: behaviour cloning, then the RL objectives, under FSDP2 and DDP."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    torch.set_num_threads(1)
    out = Path(out_dir)
    for strategy in STRATEGIES:
        trainer = make_trainer(micro=4, strategy=strategy)  # 8 rows per rank -> 2 micro-batches
        losses = []
        for step in range(STEPS):
            losses.append(trainer.train_step(shard_batch(global_batch(step), rank, world))["loss"])
            if step == 1:
                trainer.save_checkpoint(out / f"ckpt_{strategy}")
        _save_weights(trainer, rank, out, strategy)
        if rank == 0:
            (out / f"{strategy}_losses.txt").write_text(" ".join(map(str, losses)))

        for objective, batches in rl.items():
            counting = _CountingObjective(objective)
            trainer = make_rl_trainer(objective, micro=4, strategy=strategy, objective_fn=counting)
            syncs: list[int] = []  # the micro-batch count at each DDP gradient all-reduce
            if strategy == "ddp":

                def hook(state, bucket, counting=counting, syncs=syncs):
                    syncs.append(counting.calls)
                    return allreduce_hook(state, bucket)

                trainer.module.register_comm_hook(None, hook)
            stats = [trainer.train_step(shard_batch(b, rank, world)) for b in batches]
            tag = f"{objective}_{strategy}"
            _save_weights(trainer, rank, out, tag)
            rows = [[s["loss"], s["grad_norm"]] for s in stats]
            np.savetxt(out / f"{tag}_stats_rank{rank}.txt", rows)
            if strategy == "ddp":
                np.savetxt(out / f"{tag}_syncs_rank{rank}.txt", syncs, fmt="%d")


@pytest.fixture(scope="module")
def rl_data():
    torch.set_num_threads(1)
    return {name: rl_batches(name) for name in RL}


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory, rl_data):
    out = tmp_path_factory.mktemp("dist")
    spawn(_rank_main, 2, str(out), rl_data, timeout_s=480)
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


def _ranks_weights(run: Path, tag: str) -> dict[str, dict]:
    """rank 0's gathered full state, plus each DDP replica as its rank holds it."""
    files = {"full": run / f"{tag}.safetensors"} | {
        f"rank{r}": run / f"{tag}_rank{r}.safetensors"
        for r in (0, 1)
        if (run / f"{tag}_rank{r}.safetensors").exists()
    }
    return {who: load_file(str(f)) for who, f in files.items()}


def _assert_weights_equal(got: dict, want: dict, start: dict, who: str) -> None:
    assert got.keys() == {k for k in want if not k.startswith("_act")}, who
    moved = max((want[k] - start[k]).abs().max().item() for k in got)
    assert moved > 1e-3, who  # training really changed the weights
    for k, v in got.items():
        torch.testing.assert_close(v, want[k], atol=2e-5, rtol=1e-4, msg=f"{who}: {k}")


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_ranks_equal_one_rank(two_rank_run, reference, strategy):
    losses, states = reference
    weights = _ranks_weights(two_rank_run, strategy)
    assert len(weights) == (3 if strategy == "ddp" else 1)
    for who, got in weights.items():
        _assert_weights_equal(got, states[-1], states[0], f"{strategy} {who}")
    dist_losses = [float(x) for x in (two_rank_run / f"{strategy}_losses.txt").read_text().split()]
    np.testing.assert_allclose(dist_losses, losses, rtol=1e-4)


@pytest.fixture(scope="module")
def rl_reference(rl_data):
    """One process per objective, each global batch whole: (per-step [loss, grad_norm], start, final)."""
    torch.set_num_threads(1)
    out = {}
    for objective, batches in rl_data.items():
        trainer = make_rl_trainer(objective, micro=None)
        start = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
        stats = [trainer.train_step(b) for b in batches]
        # the batches exercise the clipping and the truncation, not only the plain ratio
        if "clip_fraction" in stats[0]:
            assert all(0 < s["clip_fraction"] < 1 for s in stats), stats
        if "mean_is_weight" in stats[0]:
            assert all(s["mean_is_weight"] < 0.95 for s in stats), stats
        out[objective] = ([[s["loss"], s["grad_norm"]] for s in stats], start, trainer.policy.state_dict())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("objective", sorted(RL))
def test_rl_objective_two_ranks_equal_one_rank(two_rank_run, rl_reference, objective, strategy):
    """After RL_STEPS steps on the same global batches, every rank holds the 1-rank weights and
    reports the 1-rank loss and pre-clip gradient norm. Unsynced gradients leave each rank with its
    own shard's Adam steps (the weights differ by ~lr); summed instead of averaged ones double the
    gradient norm (Adam alone would hide a scale)."""
    want_stats, start, final = rl_reference[objective]
    tag = f"{objective}_{strategy}"
    weights = _ranks_weights(two_rank_run, tag)
    assert len(weights) == (3 if strategy == "ddp" else 1)
    for who, got in weights.items():
        _assert_weights_equal(got, final, start, f"{tag} {who}")
    for rank in (0, 1):
        got_stats = np.loadtxt(two_rank_run / f"{tag}_stats_rank{rank}.txt", ndmin=2)
        np.testing.assert_allclose(
            got_stats, want_stats, rtol=1e-4, err_msg=f"{tag} rank {rank}: [loss, grad_norm]"
        )
    assert np.asarray(want_stats)[:, 1].min() > 0.05  # the gradients are not trivially small


@pytest.mark.slow
@pytest.mark.parametrize("objective", sorted(RL))
def test_ddp_syncs_only_on_the_last_micro_batch(two_rank_run, objective):
    """Each rank's shard is 2 micro-batches: every gradient all-reduce (DDP comm hook) runs during
    the second one's backward, i.e. after 2, 4, ... objective calls, never after an odd count."""
    for rank in (0, 1):
        syncs = np.loadtxt(two_rank_run / f"{objective}_ddp_syncs_rank{rank}.txt", dtype=int, ndmin=1)
        per_step = len(syncs) // RL_STEPS
        assert per_step >= 1 and len(syncs) == per_step * RL_STEPS
        assert syncs.tolist() == [2 * (s + 1) for s in range(RL_STEPS) for _ in range(per_step)]


def test_gradient_accumulation_equals_full_batch(reference):
    losses, states = reference
    trainer = make_trainer(micro=3)  # 16 rows -> micro-batches 3,3,3,3,3,1 (uneven on purpose)
    for step in range(STEPS):
        trainer.train_step(global_batch(step))
    for k, v in trainer.policy.state_dict().items():
        torch.testing.assert_close(v, states[-1][k], atol=2e-5, rtol=1e-4, msg=k)


@pytest.mark.parametrize("max_grad_norm", [0.5, None])  # clipped or not, the step is checked
def test_a_step_whose_gradient_is_not_finite_is_skipped_and_leaves_the_weights_alone(max_grad_norm):
    trainer = make_trainer(micro=None, max_grad_norm=max_grad_norm)
    batch = global_batch(0)
    batch["actions"][0, 0, 0] = float("nan")  # one corrupted row
    before = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    stats = trainer.train_step(batch)
    assert stats["nonfinite_skipped"] == 1.0 and not np.isfinite(stats["grad_norm"]), stats
    for k, v in trainer.policy.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert trainer.train_step(global_batch(1))["nonfinite_skipped"] == 0.0  # and then trains on


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_checkpoint_from_two_ranks_resumes_on_one(two_rank_run, reference, strategy):
    losses, states = reference
    trainer = make_trainer(micro=None)
    trainer.load_checkpoint(two_rank_run / f"ckpt_{strategy}")
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
    with pytest.raises(
        ConfigError, match=r"strategy 'zero3' unknown; known: \['auto', 'ddp', 'fsdp', 'none'\]"
    ):
        TrainerConfig(strategy="zero3")
    trainer = make_trainer(micro=None)  # auto, one process
    assert trainer.strategy == "none" and trainer.parallel.name == "none" and trainer.module is trainer.policy


def test_a_step_with_another_objective_uses_it_once_and_keeps_the_trainers_own():
    """The job's warm start clones demonstrations (``sft``) with a PPO trainer: a step given another
    registry objective equals a step of a trainer built with it, and the next plain step is the
    trainer's own objective again."""
    batch = global_batch(0)
    ppo = ActorTrainer(make_policy(), "decoupled_ppo", TrainerConfig(lr=1e-2, max_grad_norm=0.5))
    sft = make_trainer(None)
    a = ppo.train_step(batch, "sft", {"kind": "mse"})
    b = sft.train_step(batch)
    assert a["sft_loss"] == pytest.approx(b["sft_loss"]) and "approx_kl" not in a
    for (name, p), q in zip(ppo.policy.named_parameters(), sft.policy.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert ppo.objective_cfg == {} and ppo.objective.__name__ == "decoupled_ppo_objective"
    with pytest.raises(KeyError):  # the batch has no RL fields: the trainer's own objective ran
        ppo.train_step(batch)
