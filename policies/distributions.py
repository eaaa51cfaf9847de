"""A diagonal Gaussian over an action chunk ``[N, H, A]`` in the policy's normalized space [-1, 1].

Two uses: PPO/GRPO sample an unsquashed Gaussian and re-evaluate stored samples (the env clips to
its bounds); SAC samples a tanh-squashed Gaussian with the reparameterization trick. Log-probs are
chunk-level: summed over H and A (one decision per chunk); ``dim_log_prob`` keeps them per action
dimension for losses that take one ratio per dimension (GRPO's ``ratio="dim"``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_LOG_2PI = math.log(2.0 * math.pi)


class ChunkGaussian:
    def __init__(self, mean: Tensor, log_std: Tensor, squash: bool = False):
        self.mean = mean
        self.log_std = log_std.expand_as(mean)
        self.squash = squash

    def _gauss_log_prob(self, u: Tensor) -> Tensor:
        """log N(u; mu, sigma) per dim = -((u - mu)/sigma)^2 / 2 - log sigma - log(2 pi) / 2."""
        z = (u - self.mean) / self.log_std.exp()
        return -0.5 * z.pow(2) - self.log_std - 0.5 * _LOG_2PI

    def _squash_correction(self, u: Tensor) -> Tensor:
        """log |d tanh(u) / du| = 2 (log 2 - u - softplus(-2u)), the stable form."""
        return 2.0 * (math.log(2.0) - u - torch.nn.functional.softplus(-2.0 * u))

    def sample(self, deterministic: bool = False, reparameterize: bool = False) -> tuple[Tensor, Tensor]:
        """Returns (action, chunk log-prob [N]). With squash, action = tanh(u)."""
        if deterministic:
            u = self.mean
        else:
            noise = torch.randn_like(self.mean)
            u = self.mean + self.log_std.exp() * noise
            if not reparameterize:
                u = u.detach()
        logp = self._gauss_log_prob(u)
        if not self.squash:
            return u, logp.flatten(1).sum(-1)
        logp = logp - self._squash_correction(u)
        return torch.tanh(u), logp.flatten(1).sum(-1)

    def scaled(self, scale: Tensor | None) -> ChunkGaussian:
        """The same Gaussian with every std times ``scale`` [N] (one factor per row); ``None``: itself.

        A robot that explores with a fraction of the policy's noise (``RealEnvWorker``'s
        ``noise_scale``) acts with this distribution; scoring its stored actions under it keeps the
        importance weight of fresh rows at 1 instead of ~``scale ** dims``."""
        if scale is None:
            return self
        log_s = torch.log(torch.as_tensor(scale, dtype=self.log_std.dtype, device=self.log_std.device))
        shape = (-1,) + (1,) * (self.mean.dim() - 1)
        return ChunkGaussian(self.mean, self.log_std + log_s.reshape(shape), self.squash)

    def log_prob(self, action: Tensor) -> Tensor:
        """Chunk log-prob [N] of a stored action (inverse-tanh'd when squashed, clamped for stability)."""
        return self.dim_log_prob(action).sum(-1)

    def dim_log_prob(self, action: Tensor) -> Tensor:
        """Log-prob of every action dimension of every row [N, H * A]; their sum is ``log_prob``."""
        if not self.squash:
            return self._gauss_log_prob(action).flatten(1)
        u = torch.atanh(action.clamp(-1.0 + 1e-6, 1.0 - 1e-6))
        return (self._gauss_log_prob(u) - self._squash_correction(u)).flatten(1)

    def entropy(self) -> Tensor:
        """H = sum (log sigma + (1 + log 2 pi) / 2) [N] (of the unsquashed Gaussian)."""
        return (self.log_std + 0.5 * (1.0 + _LOG_2PI)).flatten(1).sum(-1)
