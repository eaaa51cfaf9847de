"""Learning algorithms as pure tensor functions, looked up by name: ``algorithms.get("ppo")``.

Importing this package imports torch (learner side only) and fills the registries.
"""

from rlinf_robot.algorithms import grpo, objectives, offpolicy, ppo, rlpd, sac, sft  # noqa: F401  (fill registries)
from rlinf_robot.algorithms.registry import (
    available,
    get,
    get_advantage,
    get_loss,
    get_objective,
    register_advantage,
    register_loss,
    register_objective,
)

__all__ = [
    "available",
    "get",
    "get_advantage",
    "get_loss",
    "get_objective",
    "register_advantage",
    "register_loss",
    "register_objective",
]
