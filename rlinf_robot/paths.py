"""Where things live: the repository root, the two virtual environments, generated assets.

Every path can be overridden by an environment variable so an installed (non-editable) copy on a
robot PC or a cluster node finds its franka-sim venv and model files too.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

REPO_ROOT = Path(os.environ.get("RLINF_ROBOT_ROOT", Path(__file__).resolve().parent.parent))


def franka_sim_venv() -> Path:
    """The separate venv holding franka-sim (it pins numpy 1.26 and mujoco < 3.3)."""
    return Path(os.environ.get("RLINF_FRANKA_SIM_VENV", REPO_ROOT / ".venv-franka-sim"))


def fr3_mjcf_wrapper() -> Path:
    """The MJCF wrapper franka-sim loads through ``FR3_MJCF`` (written by ``make setup``)."""
    return Path(os.environ.get("FR3_MJCF", REPO_ROOT / "build" / "fr3" / "fr3_wrapper.xml"))


def fr3_assets_dir() -> Path:
    """The FR3 MJCF + meshes shipped in the franky-sim wheel (installed --no-deps in the main venv).

    Located without importing franky_sim, whose import pulls dependencies we keep out of this venv.
    Falls back to the franka-sim venv's copy.
    """
    override = os.environ.get("RLINF_FR3_ASSETS")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("franky_sim")
    if spec is not None and spec.submodule_search_locations:
        cand = Path(next(iter(spec.submodule_search_locations))) / "assets"
        if (cand / "fr3.xml").exists():
            return cand
    for cand in sorted(franka_sim_venv().glob("lib/python*/site-packages/franky_sim/assets")):
        if (cand / "fr3.xml").exists():
            return cand
    raise FileNotFoundError(
        "FR3 model not found: run `make setup` (installs franky-sim) or set RLINF_FR3_ASSETS"
    )


def write_fr3_wrapper(dest: Path | None = None, assets: Path | None = None) -> Path:
    """Write the wrapper MJCF: include fr3.xml, then set meshdir *after* the include so it wins."""
    dest = dest or fr3_mjcf_wrapper()
    assets = assets or fr3_assets_dir()
    text = (
        "<mujoco>\n"
        f'  <include file="{assets / "fr3.xml"}"/>\n'
        f'  <compiler meshdir="{assets / "meshes"}"/>\n'
        "</mujoco>\n"
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists() or dest.read_text() != text:
        tmp = dest.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(dest)
    return dest
