"""MLP actor-critic on the state vector, for PPO (Gaussian) and SAC (tanh-squashed Gaussian).

PPO: mean = MLP(s), state-independent log-std, separate value MLP.
SAC: mean, log-std = MLP(s), action = tanh(u); critics are a ``QEnsemble`` (LayerNorm for RLPD).
A running observation normalizer is part of the policy (saved with it) and is updated explicitly by
the training loop, never inside ``forward``, so log-probs stay consistent within an update.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from policies.base import BasePolicy, PolicyOutput, state_tensor
from policies.distributions import ChunkGaussian
from policies.registry import register
from rlinf_robot.envs.spec import ActionSpec, ObsSpec
from rlinf_robot.errors import ConfigError

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU}


def mlp(
    sizes: list[int], activation: str = "tanh", layer_norm: bool = False, out_gain: float = 1.0
) -> nn.Sequential:
    """Linear layers with orthogonal init; the last layer's gain is ``out_gain`` (small for policy means)."""
    if activation not in _ACTIVATIONS:
        raise ConfigError(f"activation {activation!r} not in {sorted(_ACTIVATIONS)}")
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        last = i == len(sizes) - 2
        nn.init.orthogonal_(lin.weight, out_gain if last else np.sqrt(2))
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if not last:
            if layer_norm:
                layers.append(nn.LayerNorm(sizes[i + 1]))
            layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class RunningNorm(nn.Module):
    """x -> clip((x - mean) / sqrt(var + eps), +-clip), with mean/var from every batch seen (Chan's merge)."""

    def __init__(self, dim: int, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        self.clip, self.eps = clip, eps
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(1e-4))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        x = x.reshape(-1, x.shape[-1]).float()
        b_mean, b_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        total = self.count + n
        delta = b_mean - self.mean
        self.mean += delta * n / total
        self.var.copy_((self.var * self.count + b_var * n + delta.pow(2) * self.count * n / total) / total)
        self.count.copy_(total)

    def forward(self, x: Tensor) -> Tensor:
        return ((x - self.mean) / torch.sqrt(self.var + self.eps)).clamp(-self.clip, self.clip)


@register("mlp")
class MLPPolicy(BasePolicy):
    """Gaussian (``squash=False``, PPO) or tanh-squashed (``squash=True``, SAC) MLP policy."""

    def __init__(
        self,
        action_spec: ActionSpec,
        obs_spec: ObsSpec | None = None,
        state_dim: int | None = None,
        hidden: tuple[int, ...] = (64, 64),
        chunk_size: int = 1,
        squash: bool = False,
        activation: str = "tanh",
        init_log_std: float = -0.5,
        obs_norm: bool = True,
        value_head: bool = True,
    ):
        super().__init__()
        if state_dim is None:
            if obs_spec is None:
                raise ConfigError("mlp policy needs obs_spec or state_dim")
            state_dim = int(np.prod(obs_spec.state_shape))
        if chunk_size < 1:
            raise ConfigError(f"chunk_size must be >= 1, got {chunk_size}")
        self._init_action_space(action_spec, chunk_size)
        self.squash = squash
        out = self.chunk_size * self.action_dim
        sizes = [state_dim, *hidden]
        self.obs_norm = RunningNorm(state_dim) if obs_norm else nn.Identity()
        self.actor = mlp([*sizes, out * (2 if squash else 1)], activation, out_gain=0.01)
        if not squash:
            self.log_std = nn.Parameter(torch.full((out,), float(init_log_std)))
        self.critic = mlp([*sizes, 1], activation, out_gain=1.0) if value_head else None

    def std_parameters(self) -> list[nn.Parameter]:
        """The state-independent log-std (none for a squashed head: there the std is an output)."""
        return [] if self.squash else [self.log_std]

    def update_obs_norm(self, states: np.ndarray | Tensor) -> None:
        if isinstance(self.obs_norm, RunningNorm):
            self.obs_norm.update(torch.as_tensor(np.asarray(states), dtype=torch.float32))

    def distribution(self, state: Tensor) -> tuple[ChunkGaussian, Tensor]:
        """The chunk Gaussian and the normalized state features."""
        x = self.obs_norm(state)
        shape = (state.shape[0], self.chunk_size, self.action_dim)
        h = self.actor(x)
        if self.squash:
            mean, log_std = h.chunk(2, dim=-1)
            log_std = log_std.clamp(-5.0, 2.0)
            return ChunkGaussian(mean.reshape(shape), log_std.reshape(shape), squash=True), x
        return ChunkGaussian(h.reshape(shape), self.log_std.reshape(shape[1:])), x

    def value(self, obs: dict) -> Tensor:
        return self.critic(self.obs_norm(state_tensor(obs, self._act_center.device))).squeeze(-1)

    def forward(self, batch: dict) -> dict[str, Tensor]:
        state = state_tensor(batch["obs"], self._act_center.device)
        dist, x = self.distribution(state)
        out = {"mean": torch.tanh(dist.mean) if self.squash else dist.mean, "entropy": dist.entropy()}
        if not self.squash:  # "mean" is then the Gaussian's own, so (mean, log_std) give its KL
            out["log_std"] = dist.log_std
        if batch.get("raw_actions") is not None:
            per_dim = dist.scaled(batch.get("noise_scale")).dim_log_prob(batch["raw_actions"])
            out["dim_log_prob"], out["log_prob"] = per_dim, per_dim.sum(-1)
        if self.critic is not None:
            out["value"] = self.critic(x).sum(-1)  # [B] (not a view: FSDP2 hooks outputs)
        return out

    def sample(self, obs: dict, deterministic: bool = False) -> tuple[Tensor, Tensor]:
        """Reparameterized (action in [-1, 1], chunk log-prob) for SAC's actor update."""
        dist, _ = self.distribution(state_tensor(obs, self._act_center.device))
        return dist.sample(deterministic, reparameterize=True)

    @torch.no_grad()
    def predict_action_batch(self, obs: dict, deterministic: bool = False) -> PolicyOutput:
        state = state_tensor(obs, self._act_center.device)
        dist, x = self.distribution(state)
        raw, logp = dist.sample(deterministic)
        value = self.critic(x).squeeze(-1) if self.critic is not None else None
        return PolicyOutput(self.to_env_actions(raw), raw, logp, value)


class EnsembleLinear(nn.Module):
    """E independent linear layers applied in one batched matmul: ``[E, B, in] -> [E, B, out]``."""

    def __init__(self, num: int, fan_in: int, fan_out: int, gain: float = np.sqrt(2)):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num, fan_in, fan_out))
        self.bias = nn.Parameter(torch.zeros(num, 1, fan_out))
        for w in self.weight:
            nn.init.orthogonal_(w, gain)

    def forward(self, x: Tensor) -> Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class QEnsemble(nn.Module):
    """E independent critics Q_e(s, a), evaluated together as batched matmuls -> ``[E, B]``.

    ``layer_norm=True`` puts a (per-critic) LayerNorm after every hidden layer: RLPD's fix for critic
    divergence when training on out-of-distribution demo actions at a high update-to-data ratio.
    """

    def __init__(
        self,
        state_dim: int,
        action_dim: int,
        num_critics: int = 2,
        hidden: tuple[int, ...] = (256, 256),
        layer_norm: bool = False,
        activation: str = "relu",
    ):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ConfigError(f"activation {activation!r} not in {sorted(_ACTIVATIONS)}")
        self.num_critics = num_critics
        sizes = [state_dim + action_dim, *hidden]
        self.layers = nn.ModuleList(
            EnsembleLinear(num_critics, a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self.norm_scale = nn.ParameterList(
            nn.Parameter(torch.ones(num_critics, 1, h)) for h in (hidden if layer_norm else ())
        )
        self.norm_shift = nn.ParameterList(
            nn.Parameter(torch.zeros(num_critics, 1, h)) for h in (hidden if layer_norm else ())
        )
        self.act = _ACTIVATIONS[activation]()
        self.out = EnsembleLinear(num_critics, sizes[-1], 1, gain=1.0)

    def forward(self, state: Tensor, action: Tensor) -> Tensor:
        x = torch.cat([state, action.flatten(1)], dim=-1).unsqueeze(0).expand(self.num_critics, -1, -1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if len(self.norm_scale):
                x = F.layer_norm(x, x.shape[-1:]) * self.norm_scale[i] + self.norm_shift[i]
            x = self.act(x)
        return self.out(x).squeeze(-1)
