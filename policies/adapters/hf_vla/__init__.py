"""hf_vla: an OpenVLA / OpenVLA-OFT style policy on a transformers PaliGemma backbone."""

from policies.adapters.hf_vla.config import HFVLAConfig, tiny_paligemma_config

__all__ = ["HFVLAConfig", "tiny_paligemma_config"]
