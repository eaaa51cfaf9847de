"""``policies.make("hf_vla", ...)``: a VLA on a real transformers VLM backbone (PaliGemma).

Sequence: [image tokens of every camera][prompt tokens, right-padded][then, by head]
  tokens     -> H*A action tokens, causal (PaliGemma's prefix-LM: prefix bidirectional, suffix causal)
  continuous -> [proprio token][H action queries], all in the bidirectional prefix (parallel decoding)
Position ids are always explicit (1..S) so cached autoregressive decoding and the teacher-forced
pass used in training give the same log-probs (PPO's first ratio is exactly 1).

On a GPU node: ``HFVLAPolicy.from_pretrained("/models/paligemma-3b-pt-224", action_spec=...,
head="continuous", torch_dtype=torch.bfloat16)`` loads real weights; the heads start fresh unless
the directory holds ``vla_heads.safetensors`` from ``save_pretrained``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from policies.adapters.hf_vla.action_tokens import ActionTokenizer
from policies.adapters.hf_vla.config import CONFIG_NAME, HFVLAConfig, tiny_paligemma_config
from policies.adapters.hf_vla.heads import HEAD_TYPES
from policies.base import BasePolicy, PolicyOutput, image_tensors
from policies.registry import register
from policies.tokenizer import build_byte_tokenizer, byte_vocab_size
from rlinf_robot.envs.spec import ActionSpec, ObsSpec
from rlinf_robot.errors import ConfigError

HEADS_FILE = "vla_heads.safetensors"


@register("hf_vla")
class HFVLAPolicy(BasePolicy):
    uses_images = True

    def __init__(
        self,
        action_spec: ActionSpec | None = None,
        obs_spec: ObsSpec | None = None,
        backbone=None,
        tokenizer=None,
        vla_config: HFVLAConfig | None = None,
        tiny_backbone: dict | None = None,
        **cfg,
    ):
        super().__init__()
        if vla_config is None:
            if action_spec is None or obs_spec is None:
                raise ConfigError("hf_vla needs action_spec and obs_spec (or vla_config)")
            cfg.setdefault("cameras", list(obs_spec.images))
            unknown = [c for c in cfg["cameras"] if c not in obs_spec.images]
            if unknown:
                raise ConfigError(
                    f"hf_vla.cameras {unknown} not in the env's cameras {sorted(obs_spec.images)}"
                )
            vla_config = HFVLAConfig(
                action_mode=action_spec.mode,
                action_low=action_spec.low.tolist(),
                action_high=action_spec.high.tolist(),
                control_hz=action_spec.control_hz,
                gripper=action_spec.gripper,
                state_dim=int(np.prod(obs_spec.state_shape)),
                **cfg,
            )
        self.vcfg = vc = vla_config
        if backbone is None:  # a tiny random PaliGemma for tests / CPU; real ones come via from_pretrained
            from transformers import PaliGemmaForConditionalGeneration

            tokenizer = tokenizer or build_byte_tokenizer()
            image_token = byte_vocab_size()
            bb_cfg = tiny_paligemma_config(image_token + 1 + vc.n_bins, image_token, **(tiny_backbone or {}))
            backbone = PaliGemmaForConditionalGeneration(bb_cfg)
        self.backbone = backbone
        self.tokenizer = tokenizer or build_byte_tokenizer()
        spec = ActionSpec(
            vc.action_mode,
            (len(vc.action_low),),
            np.asarray(vc.action_low, np.float32),
            np.asarray(vc.action_high, np.float32),
            float(vc.control_hz),
            bool(vc.gripper),
        )
        self._init_action_space(spec, vc.chunk_size)
        text_cfg = backbone.config.get_text_config()
        d = text_cfg.hidden_size
        self.act_tok = ActionTokenizer(vc.n_bins, text_cfg.vocab_size - vc.n_bins)
        vis = backbone.config.vision_config
        self.image_size, self.image_tokens = vis.image_size, (vis.image_size // vis.patch_size) ** 2
        self.value_head = nn.Linear(d, 1)
        self.state_proj: nn.Module | None = None
        self.head = HEAD_TYPES[vc.head]()  # policies/adapters/hf_vla/heads.py
        self.head.build(self, d)
        self._prompt_cache: dict[str, list[int]] = {}

    # ----------------------------------------------------------- save / load
    def head_state_dict(self) -> dict[str, Tensor]:
        return {k: v for k, v in self.state_dict().items() if not k.startswith("backbone.")}

    def save_pretrained(self, path: str | Path) -> None:
        from safetensors.torch import save_file

        Path(path).mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        self.vcfg.save(path)
        save_file(
            {k: v.contiguous() for k, v in self.head_state_dict().items()}, str(Path(path) / HEADS_FILE)
        )

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        action_spec: ActionSpec | None = None,
        obs_spec: ObsSpec | None = None,
        **kwargs,
    ) -> HFVLAPolicy:
        """Backbone (and tokenizer) from ``path``; VLA config and heads too when saved there."""
        from transformers import AutoModelForImageTextToText, AutoTokenizer

        path = Path(path)
        cfg_keys = set(HFVLAConfig.__dataclass_fields__)
        vla_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in cfg_keys}
        backbone = AutoModelForImageTextToText.from_pretrained(path, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(path)
        if (path / CONFIG_NAME).exists():
            policy = cls(backbone=backbone, tokenizer=tokenizer, vla_config=HFVLAConfig.load(path))
        else:
            policy = cls(action_spec, obs_spec, backbone=backbone, tokenizer=tokenizer, **vla_kw)
        if (path / HEADS_FILE).exists():
            from safetensors.torch import load_file

            missing = policy.load_state_dict(load_file(str(path / HEADS_FILE)), strict=False)
            bad = [k for k in missing.missing_keys if not k.startswith("backbone.")] + missing.unexpected_keys
            if bad:
                raise ConfigError(f"{path / HEADS_FILE} does not match the policy's heads: {bad}")
        return policy

    # ---------------------------------------------------------------- inputs
    def raw_from_normalized(self, actions: Tensor) -> Tensor:
        return self.head.raw_from_normalized(self, actions)

    def _prompt_ids(self, instruction: str) -> list[int]:
        if instruction not in self._prompt_cache:
            ids = self.tokenizer(self.vcfg.prompt.format(instruction=instruction))["input_ids"]
            bos = self.tokenizer.bos_token_id
            if bos is not None and (not ids or ids[0] != bos):
                ids = [bos, *ids]
            self._prompt_cache[instruction] = ids
        return self._prompt_cache[instruction]

    def _prefix(self, obs: dict) -> tuple[Tensor, Tensor]:
        """(embeddings [N, P, d], attention mask [N, P]) of the images + prompt (+ proprio) prefix."""
        bb, vc = self.backbone, self.vcfg
        device = self.value_head.weight.device
        dtype = bb.get_input_embeddings().weight.dtype
        cams = image_tensors(obs, vc.cameras, device)
        N, C = cams[0].shape[0], len(cams)
        px = torch.stack(cams, 1).flatten(0, 1)  # [N*C, 3, h, w], N-major
        if px.shape[-1] != self.image_size or px.shape[-2] != self.image_size:
            px = F.interpolate(
                px, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False
            )
        img = bb.model.get_image_features(((px - 0.5) / 0.5).to(dtype)).pooler_output  # [N*C, T, d]
        img = img.reshape(N, C * img.shape[1], -1)
        instructions = list(obs.get("instruction") or [""] * N)
        ids = [self._prompt_ids(s) for s in instructions]
        L = max(len(x) for x in ids)
        pad = self.tokenizer.pad_token_id or 0
        text = torch.full((N, L), pad, dtype=torch.long, device=device)
        mask = torch.zeros((N, img.shape[1] + L), dtype=torch.long, device=device)
        mask[:, : img.shape[1]] = 1
        for i, x in enumerate(ids):
            text[i, : len(x)] = torch.as_tensor(x, device=device)
            mask[i, img.shape[1] : img.shape[1] + len(x)] = 1
        parts = [img, bb.get_input_embeddings()(text)]
        extra = self.head.prefix_extra(self, obs, dtype)
        if extra is not None:
            parts.append(extra)
            mask = torch.cat([mask, torch.ones(N, extra.shape[1], dtype=mask.dtype, device=device)], 1)
        return torch.cat(parts, 1), mask

    def _run(self, emb: Tensor, mask: Tensor, token_type: Tensor, cache=None, offset: int = 0) -> Tensor:
        pos = torch.arange(offset + 1, offset + emb.shape[1] + 1, device=emb.device).unsqueeze(0)
        out = self.backbone.model(
            inputs_embeds=emb,
            attention_mask=mask,
            token_type_ids=token_type,
            position_ids=pos.expand(emb.shape[0], -1),
            cache=cache,
            use_cache=cache is not None,
        )
        return out.last_hidden_state

    def _value(self, h: Tensor, mask: Tensor) -> Tensor:
        m = mask[:, : h.shape[1]].unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp_min(1.0)
        return self.value_head(pooled.float()).sum(-1)

    # ---------------------------------------------------------------- policy
    def forward(self, batch: dict) -> dict[str, Tensor]:
        return self.head.forward(self, batch["obs"], batch.get("raw_actions"), batch.get("noise_scale"))

    def std_parameters(self) -> list[nn.Parameter]:
        return self.head.std_parameters(self)

    @torch.no_grad()
    def value(self, obs: dict) -> Tensor:
        return self.head.value(self, obs)

    @torch.no_grad()
    def predict_action_batch(self, obs: dict, deterministic: bool = False) -> PolicyOutput:
        return self.head.act(self, obs, deterministic)
