"""Simulators behind one registry: ``sim.make("mujoco/fr3-reach", num_envs=8)``, ``sim.list()``.

Importing ``sim`` is light (numpy only); each simulator is imported when one of its envs is made.
"""

from sim.registry import make, names, register, spec

list = names  # noqa: A001 - the public name is sim.list(); the builtin is not used in this module

__all__ = ["list", "make", "names", "register", "spec"]
