"""Learning algorithms as pure tensor functions, looked up by name: ``algorithms.get("ppo")``.

Importing this package imports torch (learner side only) and fills the registries.
"""

from rlinf_robot.algorithms import grpo, offpolicy, ppo, rlpd, sac, sft  # noqa: F401  (fill registries)
from rlinf_robot.algorithms.registry import (
    available,
    get,
    get_advantage,
    get_loss,
    register_advantage,
    register_loss,
)

__all__ = ["available", "get", "get_advantage", "get_loss", "register_advantage", "register_loss"]
