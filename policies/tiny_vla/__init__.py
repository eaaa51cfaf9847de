"""tiny_vla: a small VLA as a transformers model (config + model registered with the Auto classes)."""

from policies.tiny_vla.configuration_tiny_vla import TinyVLAConfig
from policies.tiny_vla.modeling_tiny_vla import TinyVLAModel, TinyVLAOutput

__all__ = ["TinyVLAConfig", "TinyVLAModel", "TinyVLAOutput"]
