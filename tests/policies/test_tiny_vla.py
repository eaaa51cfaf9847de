"""tiny_vla: a transformers model registered with the Auto classes, exact save/load, offline tokenizer."""

import numpy as np
import pytest
import torch

import policies
from rlinf_robot.errors import ConfigError


@pytest.fixture
def vla(point_env):
    torch.manual_seed(0)
    pol = policies.make(
        "tiny_vla",
        action_spec=point_env.action_spec,
        obs_spec=point_env.obs_spec,
        chunk_size=3,
        hidden_size=64,
    )
    with torch.no_grad():  # the action head starts at zero; make outputs non-trivial for the checks
        pol.model.action_head.weight.normal_(0, 0.1)
    return pol


def test_auto_classes_resolve_tiny_vla(vla, tmp_path):
    from transformers import AutoConfig, AutoModel

    vla.save_pretrained(tmp_path)
    cfg = AutoConfig.from_pretrained(tmp_path)
    assert cfg.model_type == "tiny_vla" and cfg.cameras == ["front"]
    model = AutoModel.from_pretrained(tmp_path)
    assert type(model).__name__ == "TinyVLAModel"
    assert type(AutoModel.from_config(cfg)).__name__ == "TinyVLAModel"


def test_save_load_round_trip_is_exact(vla, point_env, tmp_path):
    vla.save_pretrained(tmp_path)
    assert (tmp_path / "tokenizer.json").exists() and (tmp_path / "model.safetensors").exists()
    loaded = policies.get("tiny_vla").from_pretrained(tmp_path)
    a, b = vla.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    obs = point_env.reset(seed=3)
    x, y = (
        vla.predict_action_batch(obs, deterministic=True),
        loaded.predict_action_batch(obs, deterministic=True),
    )
    np.testing.assert_array_equal(x.actions, y.actions)
    torch.testing.assert_close(x.value, y.value, rtol=0, atol=0)
    assert loaded.action_spec.mode == "ee_delta"
    np.testing.assert_array_equal(loaded.action_spec.high, point_env.action_spec.high)


def test_byte_tokenizer_is_offline_and_lossless(vla, tmp_path):
    from transformers import AutoTokenizer

    vla.save_pretrained(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    text = "move the gripper to the red ball, then ä → 🙂"
    ids = tok(text)["input_ids"]
    assert max(ids) < 256 and tok.decode(ids) == text


def test_predict_forward_consistency_and_instruction_matters(vla, point_env):
    obs = point_env.reset(seed=0)
    out = vla.predict_action_batch(obs)
    assert out.actions.shape == (4, 3, 6)
    ev = vla({"obs": obs, "raw_actions": out.raw_actions})
    torch.testing.assert_close(ev["log_prob"], out.log_prob)
    other = dict(obs, instruction=["push the block"] * 4)
    a = vla({"obs": obs})["mean"]
    b = vla({"obs": other})["mean"]
    assert (a - b).abs().max() > 1e-6  # the instruction reaches the action head
    padded = dict(obs, instruction=["reach the goal", "reach the goal and then stop", "x", "reach the goal"])
    c = vla({"obs": padded})["mean"]
    torch.testing.assert_close(c[0], a[0], atol=1e-5, rtol=1e-5)  # padding does not leak


def test_gradient_checkpointing_gives_the_same_gradients(vla, point_env):
    obs = point_env.reset(seed=0)

    def grads():
        vla.zero_grad()
        vla({"obs": obs})["mean"].square().sum().backward()
        return [p.grad.clone() for p in vla.parameters() if p.grad is not None]

    calls = []
    ln, ln_forward = vla.model.blocks[0].ln2, vla.model.blocks[0].ln2.forward
    ln.forward = lambda x: calls.append(1) or ln_forward(x)  # (hooks do not fire on recompute)
    vla.train()
    plain = grads()
    assert len(calls) == 1
    vla.model.activation_checkpointing_enable()
    ckpt = grads()
    assert len(calls) == 3  # recomputed in the backward pass: checkpointing is really on
    for g1, g2 in zip(plain, ckpt, strict=True):
        torch.testing.assert_close(g1, g2)


def test_config_errors(point_env):
    with pytest.raises(ConfigError, match="cameras"):
        policies.make(
            "tiny_vla", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, cameras=["wrist"]
        )
    with pytest.raises(ValueError, match="divisible"):
        policies.make(
            "tiny_vla", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, hidden_size=30
        )


def test_state_fields_keep_the_model_to_proprioception(tmp_path):
    """``state_fields``: the model reads only those columns of the env's state (the robot's own, so
    what the task is about must come from the cameras and the words); saved with the model."""
    from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv

    action_spec, obs_spec = RealRobotEnv.specs(RealEnvConfig.from_dict({"task": "fr3-reach"}))
    torch.manual_seed(0)
    pol = policies.make(
        "tiny_vla", action_spec=action_spec, obs_spec=obs_spec, cameras=[], hidden_size=64,
        state_fields=["tcp_pos", "gripper_width"],
    )  # fmt: skip
    assert pol.model.config.state_columns == [14, 15, 16, 21] and pol.model.config.state_dim == 4
    with torch.no_grad():
        pol.model.action_head.weight.normal_(0, 0.1)
    rng = np.random.default_rng(0)
    state = rng.normal(size=(3, obs_spec.state_shape[0])).astype(np.float32)
    obs = {"state": state, "images": {}, "instruction": ["reach the green dot"] * 3}
    np.testing.assert_array_equal(pol.model_inputs(obs)["state"].numpy(), state[:, [14, 15, 16, 21]])
    moved = state.copy()
    moved[:, obs_spec.state_slices()["goal_pos"]] += 0.3  # a column it does not read
    a = pol.predict_action_batch(obs, deterministic=True).actions
    b = pol.predict_action_batch({**obs, "state": moved}, deterministic=True).actions
    np.testing.assert_array_equal(a, b)
    pol.save_pretrained(tmp_path)
    loaded = policies.get("tiny_vla").from_pretrained(tmp_path)
    assert loaded.model.config.state_columns == [14, 15, 16, 21]
    np.testing.assert_array_equal(loaded.predict_action_batch(obs, deterministic=True).actions, a)
    with pytest.raises(ConfigError, match="state_fields \\['object_pose'\\] not in"):
        policies.make(
            "tiny_vla", action_spec=action_spec, obs_spec=obs_spec, cameras=[], state_fields=["object_pose"]
        )


def test_keypoint_encoder_finds_a_blob_and_pooled_text_round_trip(point_env, tmp_path):
    """``vision_encoder="keypoints"``: each camera becomes K spatial-softmax points (coordinates in
    [-1, 1], moving with what the maps respond to); ``pool_text``: the instruction as one token
    that still tells instructions apart. Both saved and reloaded exactly."""
    from policies.tiny_vla.modeling_tiny_vla import KeypointEncoder

    torch.manual_seed(0)
    pol = policies.make(
        "tiny_vla", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, chunk_size=2,
        hidden_size=32, vision_encoder="keypoints", num_keypoints=4, keypoint_channels=8, pool_text=True,
    )  # fmt: skip
    enc = pol.model.encoders["front"]
    assert isinstance(enc, KeypointEncoder)
    with torch.no_grad():  # a map that is the red channel: its point is where the red blob is
        last = enc.net[-1]
        last.weight.zero_()
        last.bias.zero_()
        enc.net[0].weight.zero_()
        enc.net[0].bias.zero_()
        enc.net[0].weight[0, 0] = 1.0  # channel 0 of the stem sums the red of its 4x4 cell
        enc.net[2].weight.zero_()
        enc.net[2].bias.zero_()
        enc.net[2].weight[0, 0, 1, 1] = 1.0
        last.weight[0, 0, 1, 1] = 10.0
        enc.log_temperature.fill_(-2.0)
    size = pol.model.config.image_size
    img = torch.zeros(1, 3, size, size)
    img[0, 0, 8:16, 72:80] = 1.0  # red, top right
    maps = enc.net((img - 0.5) / 0.5).flatten(2)
    point = torch.softmax(maps / enc.log_temperature.exp(), -1) @ enc.grid
    assert point[0, 0, 0] > 0.4 and point[0, 0, 1] < -0.4, point[0, 0]  # x right, y up (rows down)
    assert enc(img).shape == (1, 4, 32)

    obs = point_env.reset(seed=0)
    with torch.no_grad():
        pol.model.action_head.weight.normal_(0, 0.1)
    a = pol({"obs": obs})["mean"]
    b = pol({"obs": dict(obs, instruction=["push the block"] * len(obs["state"]))})["mean"]
    assert (a - b).abs().max() > 1e-6  # the pooled instruction still reaches the actions
    pol.save_pretrained(tmp_path)
    loaded = policies.get("tiny_vla").from_pretrained(tmp_path)
    assert loaded.model.config.vision_encoder == "keypoints" and loaded.model.config.pool_text
    np.testing.assert_array_equal(
        loaded.predict_action_batch(obs, deterministic=True).actions,
        pol.predict_action_batch(obs, deterministic=True).actions,
    )
    with pytest.raises(ValueError, match="vision_encoder 'resnet' is not one of"):
        policies.make(
            "tiny_vla",
            action_spec=point_env.action_spec,
            obs_spec=point_env.obs_spec,
            vision_encoder="resnet",
        )


def reloaded(pol, obs, path):
    """``pol`` saved to ``path`` and loaded back; asserts the copy acts exactly as ``pol`` on ``obs``."""
    pol.save_pretrained(path)
    loaded = policies.get("tiny_vla").from_pretrained(path)
    np.testing.assert_array_equal(
        loaded.predict_action_batch(obs, deterministic=True).actions,
        pol.predict_action_batch(obs, deterministic=True).actions,
    )
    return loaded


def test_the_point_path_carries_where_the_points_are_to_the_actions(point_env, tmp_path):
    """``point_path``: every camera's keypoint coordinates and the proprio reach the action queries
    through an MLP as well. Moving a point moves the actions through that path alone (the tokens'
    own point embedding is zeroed), gradients reach the MLP, and it is saved and reloaded exactly."""
    torch.manual_seed(0)
    pol = policies.make(
        "tiny_vla", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, chunk_size=2,
        hidden_size=32, vision_encoder="keypoints", num_keypoints=4, keypoint_channels=8, pool_text=True,
        point_path=True,
    )  # fmt: skip
    model = pol.model
    assert model.point_mlp is not None
    obs = point_env.reset(seed=0)
    with torch.no_grad():
        model.action_head.weight.normal_(0, 0.1)
        for enc in model.encoders.values():
            enc.point.weight.zero_()  # the tokens no longer say where the points are
    base = pol({"obs": obs})["mean"]
    with torch.no_grad():  # move every point of the front camera: only the point path can tell
        enc = model.encoders["front"]
        enc.grid.add_(0.3)
    moved = pol({"obs": obs})["mean"]
    assert (moved - base).abs().max() > 1e-5
    moved.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.point_mlp.parameters())
    assert reloaded(pol, obs, tmp_path).model.config.point_path
    with pytest.raises(ValueError, match="point_path needs vision_encoder='keypoints'"):
        policies.make(
            "tiny_vla", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, point_path=True
        )


def test_the_aux_path_acts_from_its_estimate_and_learns_it_only_from_the_aux_loss(point_env, tmp_path):
    """``aux_path``: the auxiliary output comes from an MLP over the points and the proprio, and its
    estimate (gradient stopped) conditions the action queries. The action loss trains the control
    MLP but leaves the estimator alone; the aux loss trains the estimator; no aux token is added."""
    torch.manual_seed(0)
    pol = policies.make(
        "tiny_vla", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, chunk_size=2,
        hidden_size=32, vision_encoder="keypoints", num_keypoints=4, keypoint_channels=8, pool_text=True,
        aux_dim=3, aux_path=True,
    )  # fmt: skip
    model = pol.model
    assert model.aux_query is None and model.aux_head is None and model.point_mlp is None
    obs = point_env.reset(seed=0)
    with torch.no_grad():
        model.action_head.weight.normal_(0, 0.1)  # zero-initialized: nothing would flow back through it
    out = pol({"obs": obs})
    assert out["aux"].shape == (len(obs["state"]), 3)
    out["mean"].sum().backward()
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model.aux_mlp.parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.aux_in.parameters())
    pol.zero_grad()
    pol({"obs": obs})["aux"].square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.aux_mlp.parameters())
    with torch.no_grad():  # the actions read the estimate
        base = pol({"obs": obs})["mean"]
        model.aux_mlp[-1].bias.add_(1.0)
        assert (pol({"obs": obs})["mean"] - base).abs().max() > 1e-5
    assert reloaded(pol, obs, tmp_path).model.config.aux_path
    with pytest.raises(ValueError, match="aux_path needs"):
        policies.make(
            "tiny_vla", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec,
            vision_encoder="keypoints", aux_path=True,
        )  # fmt: skip
