"""``TinyVLAModel``: a small vision-language-action transformer, a real ``PreTrainedModel``.

Tokens, in order: per camera 36 patch tokens (a two-conv patchifier at 96 px; or K keypoint
tokens, ``vision_encoder="keypoints"``), the instruction's
byte tokens, one proprio (state) token, H action-query tokens (each plus the proprio embedding) and
a value token. A pre-LN
transformer runs over all of them with full (bidirectional) attention; the H action-query outputs
decode the whole chunk in parallel (OpenVLA-OFT's parallel decoding) to Gaussian means, with a
learned per-(step, dim) log-std for RL; the value token feeds the critic. With ``aux_dim`` an
auxiliary token (before the queries) predicts privileged sim values during SFT only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.utils import ModelOutput

from policies.mlp import RunningNorm
from policies.tiny_vla.configuration_tiny_vla import TinyVLAConfig


@dataclass
class TinyVLAOutput(ModelOutput):
    action_mean: Tensor | None = None  # [N, H, A] normalized action space
    action_log_std: Tensor | None = None  # [H, A]
    value: Tensor | None = None  # [N]
    aux: Tensor | None = None  # [N, aux_dim] (config.aux_dim > 0)


class PatchEncoder(nn.Module):
    """uint8-derived [N, 3, S, S] in [0, 1] -> [N, (S/p)^2, d]: conv patchify (p/4 then 4) + position."""

    def __init__(self, cfg: TinyVLAConfig):
        super().__init__()
        d, p = cfg.hidden_size, cfg.patch_size
        self.size = cfg.image_size
        self.stem = nn.Conv2d(3, d // 2, kernel_size=p // 4, stride=p // 4)
        self.proj = nn.Conv2d(d // 2, d, kernel_size=4, stride=4)
        self.pos = nn.Parameter(torch.zeros(1, (cfg.image_size // p) ** 2, d))

    def forward(self, x: Tensor) -> Tensor:
        x = self.proj(F.gelu(self.stem((_resized(x, self.size) - 0.5) / 0.5)))
        return x.flatten(2).transpose(1, 2) + self.pos


class KeypointEncoder(nn.Module):
    """[N, 3, S, S] in [0, 1] -> [N, K, d]: a small conv stack whose K output maps each become one
    image point by a spatial softmax (the expected x, y of the map's activation; Levine et al. 2016,
    robomimic's ``SpatialSoftmax``), embedded as one token per point.

    Why: a manipulation policy needs *where* the block, the target and the fingers are, to a few
    millimetres; a spatial softmax hands the transformer coordinates directly, from a stem ~20x
    cheaper than 36 patch tokens per camera, so pixel policies train on a CPU in minutes."""

    def __init__(self, cfg: TinyVLAConfig):
        super().__init__()
        d, c, k = cfg.hidden_size, cfg.keypoint_channels, cfg.num_keypoints
        self.size = cfg.image_size
        self.net = nn.Sequential(
            nn.Conv2d(3, c, kernel_size=4, stride=4),  # 4x4 patches: S/4 x S/4 cells
            nn.GELU(),
            nn.Conv2d(c, c, kernel_size=3, padding=1),
            nn.GELU(),
            nn.Conv2d(c, k, kernel_size=3, padding=1),
        )
        cells = cfg.image_size // 4
        coords = (
            torch.arange(cells, dtype=torch.float32) + 0.5
        ) / cells * 2.0 - 1.0  # cell centres in [-1, 1]
        ys, xs = torch.meshgrid(coords, coords, indexing="ij")
        # saved with the weights: from_pretrained builds modules on the meta device and fills only
        # what the checkpoint holds
        self.register_buffer("grid", torch.stack([xs.flatten(), ys.flatten()], dim=1))
        self.log_temperature = nn.Parameter(torch.zeros(()))
        self.point = nn.Linear(2, d)
        self.pos = nn.Parameter(torch.zeros(1, k, d))  # which point (a learned identity per map)

    def points(self, x: Tensor) -> Tensor:
        """[N, 3, S, S] -> [N, K, 2]: each map's expected (x, y) in [-1, 1]."""
        maps = self.net((_resized(x, self.size) - 0.5) / 0.5).flatten(2)  # [N, K, cells^2]
        attn = torch.softmax(maps / self.log_temperature.exp(), dim=-1)
        return attn @ self.grid

    def embed(self, points: Tensor) -> Tensor:
        """[N, K, 2] -> [N, K, d]: one token per point."""
        return self.point(points) + self.pos

    def forward(self, x: Tensor) -> Tensor:
        return self.embed(self.points(x))


def _resized(x: Tensor, size: int) -> Tensor:
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return x


#: ``TinyVLAConfig.vision_encoder`` -> the per-camera encoder class
VISION_ENCODERS: dict[str, type[nn.Module]] = {"patches": PatchEncoder, "keypoints": KeypointEncoder}


class TinyVLABlock(GradientCheckpointingLayer):
    """Pre-LN transformer block: x + MHA(LN(x)); x + MLP(LN(x))."""

    def __init__(self, cfg: TinyVLAConfig):
        super().__init__()
        d = cfg.hidden_size
        self.heads = cfg.num_heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, cfg.mlp_ratio * d), nn.GELU(), nn.Linear(cfg.mlp_ratio * d, d))

    def forward(self, x: Tensor, attn_mask: Tensor | None = None) -> Tensor:
        N, L, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(N, L, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        x = x + self.out(a.transpose(1, 2).reshape(N, L, d))
        return x + self.mlp(self.ln2(x))


class TinyVLAPreTrainedModel(PreTrainedModel):
    config_class = TinyVLAConfig
    base_model_prefix = "tiny_vla"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["TinyVLABlock"]

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, RunningNorm):
            module.mean.zero_()
            module.var.fill_(1.0)
            module.count.fill_(1e-4)
        elif isinstance(module, (PatchEncoder, KeypointEncoder)):
            nn.init.normal_(module.pos, std=0.02)
        elif isinstance(module, TinyVLAModel):
            cfg = self.config
            for p in (module.text_pos, module.action_queries, module.value_query, module.camera_emb):
                nn.init.normal_(p, std=0.02)
            if module.aux_query is not None:
                nn.init.normal_(module.aux_query, std=0.02)
            nn.init.constant_(module.action_log_std, cfg.init_log_std)
            nn.init.zeros_(module.action_head.weight)  # start from the zero action
            nn.init.zeros_(module.action_head.bias)


class TinyVLAModel(TinyVLAPreTrainedModel):
    def __init__(self, config: TinyVLAConfig):
        super().__init__(config)
        d, H, A = config.hidden_size, config.chunk_size, config.action_dim
        if config.vision_encoder not in VISION_ENCODERS:
            raise ValueError(
                f"vision_encoder {config.vision_encoder!r} is not one of {sorted(VISION_ENCODERS)}"
            )
        encoder = VISION_ENCODERS[config.vision_encoder]
        self.encoders = nn.ModuleDict({cam: encoder(config) for cam in config.cameras})
        self.camera_emb = nn.Parameter(torch.zeros(max(len(config.cameras), 1), 1, d))
        self.text_emb = nn.Embedding(config.vocab_size, d)
        self.text_pos = nn.Parameter(torch.zeros(1, config.max_text_len, d))
        # Proprio features differ in scale by 100x (joint angles vs. cm offsets): normalize them with
        # statistics from the data (persistent buffers, saved with the weights; see update_state_norm).
        self.state_norm = RunningNorm(config.state_dim) if config.state_dim else None
        self.state_proj = nn.Linear(config.state_dim, d) if config.state_dim else None
        self.action_queries = nn.Parameter(torch.zeros(1, H, d))
        self.value_query = nn.Parameter(torch.zeros(1, 1, d))
        self.blocks = nn.ModuleList(TinyVLABlock(config) for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(d)
        self.action_head = nn.Linear(d, A)
        self.value_head = nn.Linear(d, 1)
        points_width = len(config.cameras) * config.num_keypoints * 2 + (config.state_dim or 0)
        self.aux_mlp = self.aux_in = None
        if config.aux_path:
            if config.vision_encoder != "keypoints" or not config.aux_dim:
                raise ValueError("aux_path needs vision_encoder='keypoints' and aux_dim > 0")
            self.aux_mlp = nn.Sequential(
                nn.Linear(points_width, 2 * d),
                nn.GELU(),
                nn.Linear(2 * d, 2 * d),
                nn.GELU(),
                nn.Linear(2 * d, config.aux_dim),
            )
            self.aux_in = nn.Sequential(
                nn.Linear(config.aux_dim + (config.state_dim or 0), 2 * d), nn.GELU(), nn.Linear(2 * d, d)
            )
        token_aux = config.aux_dim and not config.aux_path
        self.aux_query = nn.Parameter(torch.zeros(1, 1, d)) if token_aux else None
        self.aux_head = nn.Linear(d, config.aux_dim) if token_aux else None
        self.point_mlp = None
        if config.point_path:
            if config.vision_encoder != "keypoints":
                raise ValueError("point_path needs vision_encoder='keypoints'")
            self.point_mlp = nn.Sequential(nn.Linear(points_width, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.action_log_std = nn.Parameter(torch.zeros(H, A))
        self.gradient_checkpointing = False
        self.post_init()

    def forward(
        self,
        pixel_values: dict[str, Tensor] | None = None,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        state: Tensor | None = None,
    ) -> TinyVLAOutput:
        cfg = self.config
        parts, keep = [], []
        N = next(t.shape[0] for t in (input_ids, state, *(pixel_values or {}).values()) if t is not None)
        points: list[Tensor] = []  # each camera's keypoints, for the point path
        by_points = self.point_mlp is not None or self.aux_mlp is not None
        for i, cam in enumerate(cfg.cameras):
            enc = self.encoders[cam]
            if by_points:
                points.append(enc.points(pixel_values[cam]))
                tok = enc.embed(points[-1]) + self.camera_emb[i]
            else:
                tok = enc(pixel_values[cam]) + self.camera_emb[i]
            parts.append(tok)
            keep.append(torch.ones(N, tok.shape[1], dtype=torch.bool, device=tok.device))
        if input_ids is not None:
            ids = input_ids[:, : cfg.max_text_len]
            text = self.text_emb(ids) + self.text_pos[:, : ids.shape[1]]
            m = attention_mask[:, : cfg.max_text_len] if attention_mask is not None else torch.ones_like(ids)
            if cfg.pool_text:  # one token: the mean over the instruction's bytes
                w = m.unsqueeze(-1).to(text.dtype)
                parts.append((text * w).sum(1, keepdim=True) / w.sum(1, keepdim=True).clamp(min=1.0))
                keep.append(torch.ones(N, 1, dtype=torch.bool, device=text.device))
            else:
                parts.append(text)
                keep.append(m.bool())
        H = cfg.chunk_size
        queries = self.action_queries.expand(N, -1, -1)
        if self.state_proj is not None:
            s = self.state_proj(self.state_norm(state)).unsqueeze(1)
            parts.append(s)
            keep.append(torch.ones(N, 1, dtype=torch.bool, device=state.device))
            queries = queries + s  # proprio also conditions each action query directly (a short path)
        aux = None
        if by_points:
            proprio = [self.state_norm(state)] if self.state_norm is not None else []
            feats = torch.cat([p.flatten(1) for p in points] + proprio, dim=1)
            if self.point_mlp is not None:
                queries = queries + self.point_mlp(feats).unsqueeze(1)
            if self.aux_mlp is not None:
                aux = self.aux_mlp(feats)
                queries = queries + self.aux_in(torch.cat([aux.detach(), *proprio], dim=1)).unsqueeze(1)
        extra = 0 if self.aux_query is None else 1  # the aux token goes first, before the queries
        if extra:
            parts.append(self.aux_query.expand(N, -1, -1))
        parts += [queries, self.value_query.expand(N, -1, -1)]
        keep.append(torch.ones(N, H + 1 + extra, dtype=torch.bool, device=parts[-1].device))
        x = torch.cat(parts, dim=1)
        key_mask = torch.cat(keep, dim=1)
        attn_mask = None if bool(key_mask.all()) else key_mask[:, None, None, :]
        for block in self.blocks:
            x = block(x, attn_mask)
        x = self.norm(x)
        return TinyVLAOutput(
            action_mean=self.action_head(x[:, -H - 1 : -1]),
            action_log_std=self.action_log_std,
            value=self.value_head(x[:, -1]).sum(-1),  # [N] (sum over the 1 column: not a view, for FSDP2)
            aux=self.aux_head(x[:, -H - 2]) if self.aux_head is not None else aux,
        )


def register_auto_classes() -> None:
    """Make ``AutoConfig`` / ``AutoModel`` resolve ``model_type == "tiny_vla"`` (idempotent)."""
    from transformers import AutoConfig, AutoModel

    AutoConfig.register("tiny_vla", TinyVLAConfig, exist_ok=True)
    AutoModel.register(TinyVLAConfig, TinyVLAModel, exist_ok=True)


register_auto_classes()
