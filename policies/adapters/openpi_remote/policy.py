"""``policies.make("openpi_remote", action_spec=..., host=..., port=...)``: remote pi0 / pi0.5.

Each env's observation is mapped to openpi's keys (``image_keys`` per camera, ``state_key``,
``prompt_key``; the defaults match openpi's LIBERO / DROID examples) and sent to the server with
openpi-client's ``WebsocketClientPolicy`` (one request per env: openpi servers infer batch 1). The
returned ``actions`` [H', A'] are in env units already (openpi un-normalizes on the server); they
are checked (finite, enough steps and dims), cut to [H, A] and clipped to the action spec.
Inference only: there are no log-probs to train on here.
"""

from __future__ import annotations

import numpy as np
import torch

from policies.adapters.openpi_remote.server import _INSTALL_HINT
from policies.base import BasePolicy, PolicyOutput
from policies.registry import register
from rlinf_robot.envs.spec import ActionSpec
from rlinf_robot.errors import ConfigError, LinkLost, MissingDependency, RlinfRobotError


class RemotePolicyError(RlinfRobotError):
    """The openpi server answered with an error or with actions we cannot use."""


def _client_class():
    try:
        from openpi_client.websocket_client_policy import WebsocketClientPolicy
    except ImportError as e:
        raise MissingDependency("openpi-client", hint=_INSTALL_HINT) from e

    class TimedClient(WebsocketClientPolicy):
        """openpi's client, with a receive deadline so a stalled server cannot hang a rollout."""

        def __init__(self, *args, timeout_s: float, **kwargs):
            self.timeout_s = timeout_s
            super().__init__(*args, **kwargs)

        def infer(self, obs: dict) -> dict:
            from openpi_client import msgpack_numpy

            self._ws.send(self._packer.pack(obs))
            try:
                response = self._ws.recv(timeout=self.timeout_s)
            except TimeoutError as e:
                raise LinkLost(f"openpi server sent no reply within {self.timeout_s} s") from e
            if isinstance(response, str):
                raise RemotePolicyError(f"openpi server error: {response}")
            return msgpack_numpy.unpackb(response)

    return TimedClient


@register("openpi_remote")
class OpenPIRemotePolicy(BasePolicy):
    def __init__(
        self,
        action_spec: ActionSpec,
        host: str = "127.0.0.1",
        port: int = 8000,
        chunk_size: int = 10,
        image_keys: dict[str, str] | None = None,
        state_key: str = "observation/state",
        prompt_key: str = "prompt",
        api_key: str | None = None,
        timeout_s: float = 10.0,
        obs_spec=None,
    ):
        super().__init__()
        if chunk_size < 1:
            raise ConfigError(f"openpi_remote.chunk_size must be >= 1, got {chunk_size}")
        self._init_action_space(action_spec, chunk_size)
        self.image_keys = image_keys or {"front": "observation/image", "wrist": "observation/wrist_image"}
        self.state_key, self.prompt_key = state_key, prompt_key
        self.uses_images = bool(self.image_keys)
        self.client = _client_class()(host, port, api_key=api_key, timeout_s=timeout_s)

    @property
    def server_metadata(self) -> dict:
        return self.client.get_server_metadata()

    def _request(self, obs: dict, i: int) -> dict:
        req: dict = {}
        images = obs.get("images") or {}
        for cam, key in self.image_keys.items():
            if cam in images:
                req[key] = np.ascontiguousarray(np.asarray(images[cam][i], np.uint8))
        if self.state_key:
            req[self.state_key] = np.asarray(obs["state"][i], np.float32)
        if self.prompt_key:
            instructions = obs.get("instruction") or []
            req[self.prompt_key] = str(instructions[i]) if len(instructions) > i else ""
        return req

    def _check(self, reply: dict) -> np.ndarray:
        if "actions" not in reply:
            raise RemotePolicyError(f"openpi reply has no 'actions' (keys: {sorted(reply)})")
        a = np.asarray(reply["actions"], np.float32)
        if a.ndim == 1:
            a = a[None]
        H, A = self.chunk_size, self.action_dim
        if a.ndim != 2 or a.shape[0] < H or a.shape[1] < A:
            raise RemotePolicyError(f"openpi actions {a.shape} do not cover a [{H}, {A}] chunk")
        a = a[:H, :A]
        if not np.all(np.isfinite(a)):
            raise RemotePolicyError("openpi actions contain NaN or inf")
        return self.action_spec.clip(a)

    @torch.no_grad()
    def predict_action_batch(self, obs: dict, deterministic: bool = False) -> PolicyOutput:
        N = len(obs["state"])
        actions = np.stack([self._check(self.client.infer(self._request(obs, i))) for i in range(N)])
        return PolicyOutput(actions, self.normalize_actions(actions))

    def forward(self, batch: dict):
        raise TypeError(
            "openpi_remote is inference-only: train pi0 with openpi, or use hf_vla / tiny_vla here"
        )

    def close(self) -> None:
        self.client._ws.close()
