"""``policies.make("tiny_vla", action_spec=..., obs_spec=..., **config)``: TinyVLAModel as a policy.

The wrapper owns the tokenizer and the obs -> tensors step; the model owns the weights. The model's
config records the action space, so ``TinyVLAPolicy.from_pretrained(path)`` needs nothing else.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import Tensor

from policies.base import BasePolicy, PolicyOutput, image_tensors, state_tensor
from policies.distributions import ChunkGaussian
from policies.registry import register
from policies.tiny_vla.configuration_tiny_vla import TinyVLAConfig
from policies.tiny_vla.modeling_tiny_vla import TinyVLAModel, TinyVLAOutput
from policies.tokenizer import build_byte_tokenizer, byte_vocab_size
from rlinf_robot.envs.spec import ActionSpec, ObsSpec
from rlinf_robot.errors import ConfigError


def _spec_from_config(cfg: TinyVLAConfig) -> ActionSpec:
    return ActionSpec(
        cfg.action_mode,
        (cfg.action_dim,),
        np.asarray(cfg.action_low, np.float32),
        np.asarray(cfg.action_high, np.float32),
        float(cfg.control_hz),
        bool(cfg.gripper),
    )


@register("tiny_vla")
class TinyVLAPolicy(BasePolicy):
    def __init__(
        self,
        action_spec: ActionSpec | None = None,
        obs_spec: ObsSpec | None = None,
        model: TinyVLAModel | None = None,
        tokenizer=None,
        use_state: bool = True,
        state_fields: list[str] | tuple[str, ...] | None = None,
        **config,
    ):
        super().__init__()
        if model is None:
            if action_spec is None or obs_spec is None:
                raise ConfigError("tiny_vla needs action_spec and obs_spec (or a model)")
            cams = config.pop("cameras", None)
            cams = list(obs_spec.images) if cams is None else list(cams)
            unknown = [c for c in cams if c not in obs_spec.images]
            if unknown:
                raise ConfigError(
                    f"tiny_vla.cameras {unknown} not in the env's cameras {sorted(obs_spec.images)}"
                )
            columns = None
            if state_fields is not None:  # e.g. the robot's own fields: proprioception only
                slices = obs_spec.state_slices()
                unknown = [f for f in state_fields if f not in slices]
                if unknown:
                    raise ConfigError(
                        f"tiny_vla.state_fields {unknown} not in the env's state {list(slices)}"
                    )
                columns = [i for f in state_fields for i in range(slices[f].start, slices[f].stop)]
            state_dim = (
                (len(columns) if columns is not None else int(np.prod(obs_spec.state_shape)))
                if use_state
                else 0
            )
            model = TinyVLAModel(
                TinyVLAConfig(
                    cameras=cams,
                    state_dim=state_dim,
                    state_columns=columns if use_state else None,
                    action_dim=action_spec.shape[0],
                    vocab_size=byte_vocab_size(),
                    action_mode=action_spec.mode,
                    action_low=action_spec.low.tolist(),
                    action_high=action_spec.high.tolist(),
                    control_hz=action_spec.control_hz,
                    gripper=action_spec.gripper,
                    **config,
                )
            )
        self.model = model
        self.tokenizer = tokenizer or build_byte_tokenizer()
        self._init_action_space(_spec_from_config(model.config), model.config.chunk_size)
        self._token_cache: dict[str, list[int]] = {}
        self.uses_images = bool(model.config.cameras)

    # -------------------------------------------------------------- save / load
    def save_pretrained(self, path: str | os.PathLike) -> None:
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **kwargs) -> TinyVLAPolicy:
        from transformers import AutoModel, AutoTokenizer

        model = AutoModel.from_pretrained(path, **kwargs)
        return cls(model=model, tokenizer=AutoTokenizer.from_pretrained(path))

    # ------------------------------------------------------------------ inputs
    def _tokens(self, instructions: list[str], device) -> tuple[Tensor, Tensor]:
        ids = []
        for text in instructions:
            if text not in self._token_cache:
                self._token_cache[text] = self.tokenizer(text)["input_ids"][: self.model.config.max_text_len]
            ids.append(self._token_cache[text] or [self.tokenizer.pad_token_id])
        L = max(len(x) for x in ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(ids), L), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), L), dtype=torch.long)
        for i, x in enumerate(ids):
            input_ids[i, : len(x)] = torch.as_tensor(x)
            mask[i, : len(x)] = 1
        return input_ids.to(device), mask.to(device)

    def model_inputs(self, obs: dict) -> dict:
        cfg, device = self.model.config, self._act_center.device
        inputs: dict = {}
        if cfg.cameras:
            inputs["pixel_values"] = dict(
                zip(cfg.cameras, image_tensors(obs, cfg.cameras, device), strict=True)
            )
        if cfg.state_dim:
            state = state_tensor(obs, device)
            columns = getattr(cfg, "state_columns", None)
            inputs["state"] = state[..., columns] if columns is not None else state
        instructions = list(obs.get("instruction") or [])
        if instructions:
            inputs["input_ids"], inputs["attention_mask"] = self._tokens(instructions, device)
        return inputs

    def std_parameters(self) -> list[torch.nn.Parameter]:
        """The learned per-(step, dim) exploration log-std."""
        return [self.model.action_log_std]

    def update_obs_norm(self, states) -> None:
        """Fold a batch of states into the model's proprio normalizer (call with demo / rollout states)."""
        if self.model.state_norm is not None:
            states = torch.as_tensor(np.asarray(states), dtype=torch.float32)
            columns = getattr(self.model.config, "state_columns", None)
            self.model.state_norm.update(states[..., columns] if columns is not None else states)

    # ----------------------------------------------------------------- policy
    def _run(self, obs: dict) -> tuple[ChunkGaussian, TinyVLAOutput]:
        out = self.model(**self.model_inputs(obs))
        return ChunkGaussian(out.action_mean, out.action_log_std), out

    def distribution(self, obs: dict) -> tuple[ChunkGaussian, Tensor]:
        dist, out = self._run(obs)
        return dist, out.value

    def forward(self, batch: dict) -> dict[str, Tensor]:
        dist, model_out = self._run(batch["obs"])
        out = {
            "mean": dist.mean,
            "log_std": dist.log_std,
            "entropy": dist.entropy(),
            "value": model_out.value,
        }
        if model_out.aux is not None:
            out["aux"] = model_out.aux
        if batch.get("raw_actions") is not None:
            per_dim = dist.scaled(batch.get("noise_scale")).dim_log_prob(batch["raw_actions"])
            out["dim_log_prob"], out["log_prob"] = per_dim, per_dim.sum(-1)
        return out

    @torch.no_grad()
    def value(self, obs: dict) -> Tensor:
        return self.distribution(obs)[1]

    @torch.no_grad()
    def predict_action_batch(self, obs: dict, deterministic: bool = False) -> PolicyOutput:
        dist, value = self.distribution(obs)
        raw, logp = dist.sample(deterministic)
        return PolicyOutput(self.to_env_actions(raw), raw, logp, value)
