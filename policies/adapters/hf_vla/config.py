"""``HFVLAConfig`` (the VLA's own settings, saved as ``vla_config.json`` beside the backbone) and a
tiny random PaliGemma config for CPU tests.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rlinf_robot.errors import ConfigError

HEADS = ("tokens", "continuous")
CONFIG_NAME = "vla_config.json"


@dataclass
class HFVLAConfig:
    """``head="tokens"``: OpenVLA - each action dim of each chunk step is one of ``n_bins`` uniform bins
    over [-1, 1], emitted as the last ``n_bins`` ids of the LM vocabulary, decoded autoregressively.
    ``head="continuous"``: OpenVLA-OFT - H learned query tokens after the prompt, full bidirectional
    attention, an MLP maps each query's final hidden state to one chunk step (L1 / Gaussian).
    """

    head: str = "continuous"
    chunk_size: int = 4
    n_bins: int = 256
    cameras: list[str] = field(default_factory=lambda: ["front"])
    use_state: bool = True  # one projected proprio token (continuous head only, as OFT)
    prompt: str = "In: What action should the robot take to {instruction}?\nOut:"
    init_log_std: float = -1.0
    action_mode: str = "ee_delta"
    action_low: list[float] = field(default_factory=list)
    action_high: list[float] = field(default_factory=list)
    control_hz: float = 20.0
    gripper: bool = False
    state_dim: int = 0

    def __post_init__(self):
        if self.head not in HEADS:
            raise ConfigError(f"hf_vla.head must be one of {HEADS}, got {self.head!r}")
        if not 2 <= self.n_bins <= 1024:
            raise ConfigError(f"hf_vla.n_bins must be in [2, 1024], got {self.n_bins}")
        if self.chunk_size < 1:
            raise ConfigError(f"hf_vla.chunk_size must be >= 1, got {self.chunk_size}")
        if not self.cameras:
            raise ConfigError("hf_vla.cameras must name at least one camera (the backbone is a VLM)")

    def save(self, path: str | Path) -> None:
        (Path(path) / CONFIG_NAME).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, path: str | Path) -> HFVLAConfig:
        return cls(**json.loads((Path(path) / CONFIG_NAME).read_text()))


def tiny_paligemma_config(
    vocab_size: int, image_token_id: int, image_size: int = 96, hidden: int = 64, layers: int = 2
):
    """A few-layer random PaliGemma (SigLIP + Gemma) of the real classes: ~0.3 M parameters."""
    from transformers import PaliGemmaConfig

    return PaliGemmaConfig(
        vision_config=dict(
            model_type="siglip_vision_model",
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            image_size=image_size,
            patch_size=16,
        ),
        text_config=dict(
            model_type="gemma",
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=hidden // 2,
            vocab_size=vocab_size,
        ),
        image_token_index=image_token_id,
        projection_dim=hidden,
    )
