"""``TinyVLAConfig``: every shape of the tiny VLA plus the action space it was trained for."""

from __future__ import annotations

from transformers import PretrainedConfig


class TinyVLAConfig(PretrainedConfig):
    model_type = "tiny_vla"

    def __init__(
        self,
        cameras: list[str] | tuple[str, ...] = ("front",),
        image_size: int = 96,
        state_dim: int = 0,
        state_columns: list[int] | None = None,
        action_dim: int = 7,
        chunk_size: int = 4,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_heads: int = 4,
        mlp_ratio: int = 2,
        vocab_size: int = 260,
        pad_token_id: int = 259,
        max_text_len: int = 48,
        patch_size: int = 16,
        vision_encoder: str = "patches",
        num_keypoints: int = 16,
        keypoint_channels: int = 32,
        pool_text: bool = False,
        aux_dim: int = 0,
        point_path: bool = False,
        aux_path: bool = False,
        init_log_std: float = -1.0,
        action_mode: str = "ee_delta",
        action_low: list[float] | None = None,
        action_high: list[float] | None = None,
        control_hz: float = 20.0,
        gripper: bool = False,
        **kwargs,
    ):
        self.cameras = list(cameras)
        self.image_size = image_size
        self.state_dim = state_dim
        #: the columns of the env's state vector the model reads (None: all of them); e.g. only the
        #: robot's proprioception, so what a task is about must come from the cameras and the words
        self.state_columns = list(state_columns) if state_columns is not None else None
        self.action_dim = action_dim
        self.chunk_size = chunk_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.mlp_ratio = mlp_ratio
        self.vocab_size = vocab_size
        self.max_text_len = max_text_len
        self.patch_size = patch_size
        #: per-camera image encoder (``modeling_tiny_vla.VISION_ENCODERS``): "patches" (36 patch tokens
        #: at 96 px) or "keypoints" (``num_keypoints`` spatial-softmax points, ``keypoint_channels`` wide)
        self.vision_encoder = vision_encoder
        self.num_keypoints = num_keypoints
        self.keypoint_channels = keypoint_channels
        #: the instruction as one token (its byte embeddings averaged) instead of one token per byte:
        #: a few fixed instructions need no more, and the transformer then runs over ~40 fewer tokens
        self.pool_text = pool_text
        #: width of an auxiliary output read from a token of its own (0: none): during SFT it is
        #: regressed onto what the sim knows and the model does not see (where the block or the
        #: goal is), which teaches the image encoder where to look; acting never uses it
        self.aux_dim = aux_dim
        #: with the keypoint encoder: every camera's points (x, y) and the proprio also reach the
        #: action queries through an MLP (a short path for geometry: where the goal is relative to
        #: the gripper), besides the tokens the transformer attends to
        self.point_path = point_path
        #: with the keypoint encoder and ``aux_dim``: the auxiliary output comes from an MLP over the
        #: points and the proprio (not a token), and its prediction (gradient stopped) conditions the
        #: action queries with the proprio through a second MLP: perception regressed onto where the
        #: objects are, control from that estimate, as a state-based policy acts from the true values
        self.aux_path = aux_path
        self.init_log_std = init_log_std
        self.action_mode = action_mode
        self.action_low = list(action_low) if action_low is not None else [-1.0] * action_dim
        self.action_high = list(action_high) if action_high is not None else [1.0] * action_dim
        self.control_hz = control_hz
        self.gripper = gripper
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
        if image_size % patch_size:
            raise ValueError(f"image_size ({image_size}) must be a multiple of patch_size ({patch_size})")
        super().__init__(pad_token_id=pad_token_id, **kwargs)
