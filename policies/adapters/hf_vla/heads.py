"""The two action heads of ``hf_vla``, one object each, chosen by ``HFVLAConfig.head``.

Both read the same prefix (image tokens of every camera, then the prompt) through the policy's
backbone; they differ in what follows it and so in how a chunk is produced and scored:

* ``TokenHead`` (OpenVLA): H*A action tokens after the prefix, causal, decoded one at a time with a
  KV cache; the raw action is the bin index, scored teacher-forced.
* ``ContinuousHead`` (OpenVLA-OFT): a projected proprio token and H learned queries inside the
  bidirectional prefix, decoded in one pass; a Gaussian over the chunk.

A head owns no parameters of its own: ``build`` puts them on the policy (``action_queries``,
``action_head``, ``log_std``, ``state_proj``), so checkpoints keep one flat key layout whichever
head made them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from policies.adapters.hf_vla.config import HEADS
from policies.base import PolicyOutput, state_tensor
from policies.distributions import ChunkGaussian

if TYPE_CHECKING:
    from policies.adapters.hf_vla.policy import HFVLAPolicy


class ContinuousHead:
    name = "continuous"

    def build(self, policy: HFVLAPolicy, d: int) -> None:
        vc, H, A = policy.vcfg, policy.chunk_size, policy.action_dim
        policy.action_queries = nn.Parameter(torch.randn(H, d) * 0.02)
        policy.action_head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, A))
        nn.init.zeros_(policy.action_head[-1].weight)
        nn.init.zeros_(policy.action_head[-1].bias)
        policy.log_std = nn.Parameter(torch.full((H, A), float(vc.init_log_std)))
        policy.state_proj = nn.Linear(vc.state_dim, d) if vc.use_state and vc.state_dim else None

    def std_parameters(self, policy: HFVLAPolicy) -> list[nn.Parameter]:
        """The Gaussian's learned per-(step, dim) log-std."""
        return [policy.log_std]

    def prefix_extra(self, policy: HFVLAPolicy, obs: dict, dtype: torch.dtype) -> Tensor | None:
        """The proprio token that ends the prefix ([N, 1, d]), if the policy uses state."""
        if policy.state_proj is None:
            return None
        device = policy.value_head.weight.device
        return policy.state_proj(state_tensor(obs, device)).to(dtype).unsqueeze(1)

    def raw_from_normalized(self, policy: HFVLAPolicy, actions: Tensor) -> Tensor:
        return actions

    def _dist(self, policy: HFVLAPolicy, obs: dict) -> tuple[ChunkGaussian, Tensor]:
        emb, mask = policy._prefix(obs)
        N, H = emb.shape[0], policy.chunk_size
        queries = policy.action_queries.to(emb.dtype).unsqueeze(0).expand(N, -1, -1)
        emb = torch.cat([emb, queries], 1)
        mask = torch.cat([mask, torch.ones(N, H, dtype=mask.dtype, device=mask.device)], 1)
        h = policy._run(emb, mask, torch.zeros_like(mask))
        mean = policy.action_head(h[:, -H:].float())
        return ChunkGaussian(mean, policy.log_std), policy._value(h[:, :-H], mask)

    def forward(
        self, policy: HFVLAPolicy, obs: dict, raw: Tensor | None, noise_scale: Tensor | None = None
    ) -> dict[str, Tensor]:
        dist, value = self._dist(policy, obs)
        out = {"mean": dist.mean, "log_std": dist.log_std, "entropy": dist.entropy(), "value": value}
        if raw is not None:
            out["log_prob"] = dist.scaled(noise_scale).log_prob(raw)
        return out

    def value(self, policy: HFVLAPolicy, obs: dict) -> Tensor:
        return self._dist(policy, obs)[1]

    def act(self, policy: HFVLAPolicy, obs: dict, deterministic: bool) -> PolicyOutput:
        dist, value = self._dist(policy, obs)
        raw, logp = dist.sample(deterministic)
        return PolicyOutput(policy.to_env_actions(raw), raw, logp, value)


class TokenHead:
    name = "tokens"

    def build(self, policy: HFVLAPolicy, d: int) -> None:
        """Nothing to add: action tokens are the last ``n_bins`` ids of the backbone's vocabulary."""

    def std_parameters(self, policy: HFVLAPolicy) -> list[nn.Parameter]:
        """None: a categorical over bins explores by its logits, which are the network's output."""
        return []

    def prefix_extra(self, policy: HFVLAPolicy, obs: dict, dtype: torch.dtype) -> Tensor | None:
        return None

    def raw_from_normalized(self, policy: HFVLAPolicy, actions: Tensor) -> Tensor:
        return policy.act_tok.to_bins(actions).float()

    def _logits(self, policy: HFVLAPolicy, h: Tensor) -> Tensor:
        return policy.act_tok.restrict(policy.backbone.lm_head(h)).float()

    @torch.no_grad()
    def _decode(self, policy: HFVLAPolicy, obs: dict, deterministic: bool) -> tuple[Tensor, Tensor, Tensor]:
        """Autoregressive decoding of H*A bins with a KV cache -> (bins [N,H,A], log-prob [N], value [N])."""
        from transformers import DynamicCache

        emb, mask = policy._prefix(obs)
        N, P = emb.shape[:2]
        cache = DynamicCache(config=policy.backbone.config.get_text_config())
        h = policy._run(emb, mask, torch.zeros_like(mask), cache)
        value = policy._value(h, mask)
        embed = policy.backbone.get_input_embeddings()
        bins, logp = [], torch.zeros(N, device=emb.device)
        last = h[:, -1]
        one = torch.ones(N, 1, dtype=torch.long, device=mask.device)
        for k in range(policy.chunk_size * policy.action_dim):
            logits = F.log_softmax(self._logits(policy, last), -1)
            b = logits.argmax(-1) if deterministic else torch.multinomial(logits.exp(), 1).squeeze(-1)
            logp += logits.gather(-1, b[:, None]).squeeze(-1)
            bins.append(b)
            mask = torch.cat([mask, one.to(mask.dtype)], 1)
            tok = embed(policy.act_tok.to_tokens(b)[:, None])
            last = policy._run(tok, mask, one, cache, P + k)[:, -1]
        return torch.stack(bins, 1).view(N, policy.chunk_size, policy.action_dim), logp, value

    def forward(
        self, policy: HFVLAPolicy, obs: dict, raw: Tensor | None, noise_scale: Tensor | None = None
    ) -> dict[str, Tensor]:
        """Teacher-forced scoring of the bins in ``raw`` (the chunk ``predict_action_batch`` decoded).
        Bins have no std to scale: ``noise_scale`` other than 1 is an error."""
        if noise_scale is not None and not bool(torch.all(torch.as_tensor(noise_scale) == 1)):
            raise ValueError("the tokens head samples bins: a noise_scale other than 1 does not apply")
        if raw is None:
            raise ValueError("the tokens head trains teacher-forced: pass raw_actions (bins)")
        emb, mask = policy._prefix(obs)
        N, P = emb.shape[:2]
        K = policy.chunk_size * policy.action_dim
        tokens = policy.act_tok.to_tokens(raw.reshape(N, K))
        emb = torch.cat([emb, policy.backbone.get_input_embeddings()(tokens)], 1)
        ones = torch.ones(N, K, dtype=mask.dtype, device=mask.device)
        h = policy._run(emb, torch.cat([mask, ones], 1), torch.cat([torch.zeros_like(mask), ones], 1))
        logits = F.log_softmax(self._logits(policy, h[:, P - 1 : P - 1 + K]), -1)  # [N, K, n_bins]
        probs = logits.exp()
        return {
            "log_prob": logits.gather(-1, raw.reshape(N, K, 1).long()).squeeze(-1).sum(-1),
            "entropy": -(probs * logits).sum(-1).sum(-1),
            "mean": (probs @ policy.act_tok.centers(probs.device)).view(
                N, policy.chunk_size, policy.action_dim
            ),
            "value": policy._value(h[:, :P], mask),
        }

    def value(self, policy: HFVLAPolicy, obs: dict) -> Tensor:
        emb, mask = policy._prefix(obs)
        return policy._value(policy._run(emb, mask, torch.zeros_like(mask)), mask)

    def act(self, policy: HFVLAPolicy, obs: dict, deterministic: bool) -> PolicyOutput:
        bins, logp, value = self._decode(policy, obs, deterministic)
        return PolicyOutput(policy.to_env_actions(policy.act_tok.from_bins(bins)), bins.float(), logp, value)


HEAD_TYPES: dict[str, type[ContinuousHead] | type[TokenHead]] = {
    h.name: h for h in (TokenHead, ContinuousHead)
}
assert set(HEAD_TYPES) == set(HEADS), "config.HEADS (validated without torch) must name exactly these heads"
