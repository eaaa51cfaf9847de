"""Policies: an MLP for state, a small VLA on transformers, and adapters to real VLA backbones.

``policies.make("mlp", action_spec=..., obs_spec=...)``. Importing this package is light; each policy's
module (torch, transformers, openpi-client) is imported when that policy is first made.
"""

from policies.registry import available, get, make, register

__all__ = ["BasePolicy", "PolicyOutput", "available", "get", "make", "register"]


def __getattr__(name: str):
    if name in ("BasePolicy", "PolicyOutput"):
        from policies import base

        return getattr(base, name)
    raise AttributeError(name)
