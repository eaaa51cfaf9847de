"""The FR3's MuJoCo model (arm + Franka Hand, from the franky-sim wheel): found and loaded here only.

franka-sim, the training sim (``sim/mujoco``), the simulated camera, calibration's ground-truth
scene and system identification all start from this one file, so they simulate the same arm.
``fr3_mjcf`` is the MJCF text: the wheel's ``fr3.xml``, its mesh directory, then any files of
ours to add (a table, a task's objects); ``load_fr3_spec`` is its ``MjSpec``, to edit and compile;
``write_fr3_wrapper`` puts the text in the file franka-sim reads (``FR3_MJCF``).

MuJoCo is imported only inside ``load_fr3_spec``: the robot PC imports this module (the sim
server, the camera node) without it.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rlinf_robot.paths import fr3_mjcf_wrapper, franka_sim_venv

#: OpenCV camera axes (x right, y down, z forward) -> a MuJoCo camera's (x right, y up, z backward):
#: ``R_mujoco = R_opencv @ CV_TO_MJ`` (and back, the same product: it is its own inverse). Camera
#: poses from calibration are OpenCV's; cameras in this model are MuJoCo's.
CV_TO_MJ = np.diag([1.0, -1.0, -1.0])


def fr3_assets_dir() -> Path:
    """The FR3 MJCF + meshes shipped in the franky-sim wheel (installed --no-deps in the main venv).

    Located without importing franky_sim, whose import pulls dependencies we keep out of this venv.
    Falls back to the franka-sim venv's copy; ``RLINF_FR3_ASSETS`` overrides both.
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


def fr3_mjcf(includes: Sequence[Path] = (), assets: Path | None = None) -> str:
    """MJCF text of the FR3 + hand, then each file of ``includes`` (absolute paths, ``<mujoco>``
    roots). The ``<compiler>`` comes after the robot's include so its absolute meshdir wins over
    fr3.xml's relative one."""
    assets = Path(assets or fr3_assets_dir())
    lines = [
        "<mujoco>",
        f'  <include file="{assets / "fr3.xml"}"/>',
        f'  <compiler meshdir="{assets / "meshes"}"/>',
        *(f'  <include file="{Path(p).resolve()}"/>' for p in includes),
        "</mujoco>",
    ]
    return "\n".join(lines) + "\n"


def load_fr3_spec(includes: Sequence[Path] = (), assets: Path | None = None):
    """``mujoco.MjSpec`` of ``fr3_mjcf(includes)``: edit it (sites, cameras, gravity compensation),
    then ``compile()``."""
    import mujoco

    return mujoco.MjSpec.from_string(fr3_mjcf(includes, assets))


def write_fr3_wrapper(dest: Path | None = None, assets: Path | None = None) -> Path:
    """Write ``fr3_mjcf()`` to ``dest`` (default: where franka-sim's ``FR3_MJCF`` points), only when
    it changed, atomically."""
    dest = Path(dest or fr3_mjcf_wrapper())
    text = fr3_mjcf(assets=assets)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists() or dest.read_text() != text:
        tmp = dest.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(dest)
    return dest
