"""hf_vla on a tiny random PaliGemma (the real SigLIP + Gemma classes): both heads end to end."""

import numpy as np
import pytest
import torch

import policies
from rlinf_robot.algorithms.sft import bc_loss, bc_nll_loss
from rlinf_robot.errors import ConfigError


def make(env, head, **kw):
    torch.manual_seed(0)
    return policies.make(
        "hf_vla", action_spec=env.action_spec, obs_spec=env.obs_spec, head=head, chunk_size=2, n_bins=32, **kw
    )


@pytest.mark.parametrize("head", ["tokens", "continuous"])
def test_predict_is_scored_identically_by_forward(point_env, head):
    """Cached autoregressive decoding (tokens) / sampling (continuous) and the teacher-forced training
    pass give the same log-probs and values, so PPO/GRPO's first importance ratio is exactly 1."""
    pol = make(point_env, head)
    assert type(pol.backbone).__name__ == "PaliGemmaForConditionalGeneration"
    obs = point_env.reset(seed=0)
    out = pol.predict_action_batch(obs)
    spec = point_env.action_spec
    assert out.actions.shape == (4, 2, 6)
    assert np.all(out.actions >= spec.low) and np.all(out.actions <= spec.high)
    ev = pol({"obs": obs, "raw_actions": out.raw_actions})
    torch.testing.assert_close(ev["log_prob"], out.log_prob, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(ev["value"], out.value, atol=1e-5, rtol=1e-5)
    assert ev["entropy"].shape == (4,)
    # what GRPOConfig(train_std=False) holds: the Gaussian's log-std; the token head has none
    assert pol.std_parameters() == ([pol.log_std] if head == "continuous" else [])


def test_action_tokens_are_the_vocab_tail_and_decode_to_bin_centres(point_env):
    pol = make(point_env, "tokens")
    vocab = pol.backbone.config.get_text_config().vocab_size
    assert pol.act_tok.start == vocab - 32
    a = torch.tensor([-1.0, -0.99, 0.0, 0.5, 1.0])
    bins = pol.act_tok.to_bins(a)
    assert bins.tolist() == [0, 0, 16, 24, 31]  # floor((a + 1) / 2 * 32), clamped
    assert pol.act_tok.from_bins(bins).tolist() == pytest.approx(
        [-0.96875, -0.96875, 0.03125, 0.53125, 0.96875]
    )


@pytest.mark.parametrize("head", ["tokens", "continuous"])
def test_sft_steps_fit_a_demo_batch(point_env, head):
    pol = make(point_env, head)
    obs = point_env.reset(seed=0)
    target = pol.normalize_actions(np.stack([point_env.expert_actions()] * 2, 1))  # [4, 2, 6]
    opt = torch.optim.Adam(pol.parameters(), lr=3e-3)

    def loss():
        if head == "tokens":
            return bc_nll_loss(pol({"obs": obs, "raw_actions": pol.raw_from_normalized(target)})["log_prob"])
        return bc_loss(pol({"obs": obs})["mean"], target)

    first = loss().item()
    for _ in range(15):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss().item() < 0.5 * first


@pytest.mark.parametrize("head", ["tokens", "continuous"])
def test_save_load_round_trip(point_env, head, tmp_path):
    pol = make(point_env, head)
    if head == "continuous":
        with torch.no_grad():
            pol.action_head[-1].weight.normal_(0, 0.1)
    pol.save_pretrained(tmp_path)
    loaded = policies.get("hf_vla").from_pretrained(tmp_path)
    for k, v in pol.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    obs = point_env.reset(seed=1)
    a, b = (
        pol.predict_action_batch(obs, deterministic=True),
        loaded.predict_action_batch(obs, deterministic=True),
    )
    np.testing.assert_array_equal(a.actions, b.actions)


def test_backbone_only_checkpoint_gets_fresh_heads(point_env, tmp_path):
    """What happens on a GPU node with a real PaliGemma directory: backbone + tokenizer load, the VLA
    config comes from the arguments and the heads start fresh."""
    pol = make(point_env, "continuous")
    pol.backbone.save_pretrained(tmp_path)
    pol.tokenizer.save_pretrained(tmp_path)
    loaded = policies.get("hf_vla").from_pretrained(
        tmp_path,
        action_spec=point_env.action_spec,
        obs_spec=point_env.obs_spec,
        head="continuous",
        chunk_size=2,
    )
    for k, v in pol.backbone.state_dict().items():
        assert torch.equal(v, loaded.backbone.state_dict()[k]), k
    assert loaded.predict_action_batch(point_env.reset(seed=0)).actions.shape == (4, 2, 6)


def test_config_errors(point_env):
    with pytest.raises(ConfigError, match="head"):
        make(point_env, "diffusion")
    with pytest.raises(ConfigError, match="cameras"):
        make(point_env, "tokens", cameras=["wrist"])
    with pytest.raises(ValueError, match="raw_actions"):
        make(point_env, "tokens")({"obs": point_env.reset(seed=0)})
