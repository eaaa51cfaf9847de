"""The registry, the normalized action space, and the MLP actor-critic / critic ensemble."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import policies
from policies.mlp import QEnsemble, RunningNorm
from rlinf_robot.errors import ConfigError


def test_import_policies_is_light():
    code = "import sys, policies; print(','.join(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_unknown_policy_lists_known():
    with pytest.raises(ConfigError, match="known: .*mlp.*tiny_vla"):
        policies.make("nope")
    assert {"mlp", "tiny_vla", "hf_vla", "openpi_remote"} <= set(policies.available())


def test_mlp_predict_shapes_bounds_and_logprob_consistency(point_env):
    torch.manual_seed(0)
    pol = policies.make("mlp", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, chunk_size=3)
    obs = point_env.reset(seed=0)
    out = pol.predict_action_batch(obs)
    assert out.actions.shape == (4, 3, 6) and out.actions.dtype == np.float32
    spec = point_env.action_spec
    assert np.all(out.actions >= spec.low) and np.all(out.actions <= spec.high)
    ev = pol({"obs": obs, "raw_actions": out.raw_actions})
    torch.testing.assert_close(ev["log_prob"], out.log_prob)
    torch.testing.assert_close(ev["value"], out.value)
    det = pol.predict_action_batch(obs, deterministic=True)
    np.testing.assert_allclose(det.actions, pol.to_env_actions(ev["mean"].detach()))


def test_action_normalization_round_trip(point_env):
    pol = policies.make("mlp", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec)
    a = np.array([[0.01, -0.02, 0.0, 0.1, -0.05, 0.0]], np.float32)
    np.testing.assert_allclose(pol.to_env_actions(pol.normalize_actions(a)), a, atol=1e-7)
    assert pol.normalize_actions(point_env.action_spec.high).tolist() == [1.0] * 6


def test_squashed_policy_logprob_matches_change_of_variables(point_env):
    """log pi(tanh u) = log N(u) - log(1 - tanh(u)^2): checked against the closed form per dim."""
    torch.manual_seed(0)
    pol = policies.make("mlp", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, squash=True)
    obs = point_env.reset(seed=0)
    dist, _ = pol.distribution(torch.as_tensor(obs["state"]))
    u = dist.mean + dist.log_std.exp() * torch.randn_like(dist.mean)
    a = torch.tanh(u)
    normal = torch.distributions.Normal(dist.mean, dist.log_std.exp())
    expected = (normal.log_prob(u) - torch.log(1 - a.pow(2))).flatten(1).sum(-1)
    torch.testing.assert_close(dist.log_prob(a), expected, atol=1e-3, rtol=1e-4)
    act, logp = pol.sample(obs)
    assert act.abs().max() <= 1.0 and logp.requires_grad


def test_running_norm_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, (500, 4)).astype(np.float32)
    norm = RunningNorm(4)
    for chunk in np.array_split(x, 7):
        norm.update(torch.as_tensor(chunk))
    np.testing.assert_allclose(norm.mean.numpy(), x.mean(0), rtol=1e-4)
    np.testing.assert_allclose(norm.var.numpy(), x.var(0), rtol=1e-3)


def test_q_ensemble_members_are_independent_and_layernormed():
    torch.manual_seed(0)
    q = QEnsemble(5, 2, num_critics=10, hidden=(16, 16), layer_norm=True)
    s, a = torch.randn(8, 5), torch.randn(8, 2)
    out = q(s, a)
    assert out.shape == (10, 8)
    assert out.std(0).mean() > 1e-3  # different initialisations
    out[3].sum().backward()
    grads = q.layers[0].weight.grad
    assert grads[3].abs().sum() > 0 and grads[[0, 1, 2, 4]].abs().sum() == 0
    assert len(q.norm_scale) == 2


def test_config_errors(point_env):
    with pytest.raises(ConfigError, match="chunk_size"):
        policies.make("mlp", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, chunk_size=0)
    with pytest.raises(ConfigError, match="activation"):
        policies.make(
            "mlp", action_spec=point_env.action_spec, obs_spec=point_env.obs_spec, activation="nope"
        )
