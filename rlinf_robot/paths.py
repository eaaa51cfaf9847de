"""Where things live: the repository root, the two virtual environments, generated assets.

Every path can be overridden by an environment variable so an installed (non-editable) copy on a
robot PC or a cluster node finds its franka-sim venv and model files too. The FR3 model's own files
are found (and loaded) by ``rlinf_robot.robot.franka.mjcf``.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(os.environ.get("RLINF_ROBOT_ROOT", Path(__file__).resolve().parent.parent))


def franka_sim_venv() -> Path:
    """The separate venv holding franka-sim (it pins numpy 1.26 and mujoco < 3.3)."""
    return Path(os.environ.get("RLINF_FRANKA_SIM_VENV", REPO_ROOT / ".venv-franka-sim"))


def fr3_mjcf_wrapper() -> Path:
    """The MJCF wrapper franka-sim loads through ``FR3_MJCF`` (``mjcf.write_fr3_wrapper`` writes it)."""
    return Path(os.environ.get("FR3_MJCF", REPO_ROOT / "build" / "fr3" / "fr3_wrapper.xml"))
