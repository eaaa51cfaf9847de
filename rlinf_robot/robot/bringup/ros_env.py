"""The environment a node started from a colcon install space needs (what sourcing
``install/setup.bash`` does for ament_python packages), computed in Python.

With an isolated install (colcon's default) each package ``P`` lives in ``install/P``: the
package prefix goes on ``AMENT_PREFIX_PATH`` (``get_package_share_directory`` and friends) and its
``lib/pythonX.Y/site-packages`` on ``PYTHONPATH`` (the console scripts import the package from there).
"""

from __future__ import annotations

import os
from pathlib import Path

from rlinf_robot.paths import REPO_ROOT


def default_install_dir() -> Path:
    return Path(os.environ.get("RLINF_ROS_INSTALL", REPO_ROOT / "ros_ws" / "install"))


def _prepend(env: dict[str, str], key: str, paths: list[str]) -> None:
    if not paths:
        return
    old = [p for p in env.get(key, "").split(os.pathsep) if p]
    env[key] = os.pathsep.join(dict.fromkeys([*paths, *old]))


def install_env(install_dir: Path | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) plus every package in ``install_dir``."""
    install_dir = Path(install_dir or default_install_dir())
    env = dict(os.environ if base is None else base)
    prefixes, pythonpath, path = [], [], []
    for pkg in sorted(install_dir.glob("*/share/ament_index/resource_index/packages/*")):
        prefix = pkg.parents[4]
        prefixes.append(str(prefix))
        pythonpath += [str(p) for p in sorted(prefix.glob("lib/python3*/site-packages"))]
        if (prefix / "bin").is_dir():
            path.append(str(prefix / "bin"))
    _prepend(env, "AMENT_PREFIX_PATH", prefixes)
    _prepend(env, "PYTHONPATH", pythonpath)
    _prepend(env, "PATH", path)
    return env


#: Fast DDS profile that keeps the robot PC's ROS graph on 127.0.0.1 (see the file's comment).
LOOPBACK_DDS_PROFILE = REPO_ROOT / "launch" / "config" / "fastdds_loopback.xml"
#: Settings that would override or add to the profile's transports and peers.
_DDS_OVERRIDES = (
    "ROS_AUTOMATIC_DISCOVERY_RANGE",
    "ROS_STATIC_PEERS",
    "ROS_LOCALHOST_ONLY",
    "FASTDDS_BUILTIN_TRANSPORTS",
    "FASTRTPS_DEFAULT_PROFILES_FILE",
)


def dds_env(env: dict[str, str], profile: Path | None) -> dict[str, str]:
    """``env`` with ``profile`` as every participant's default Fast DDS profile (None: unchanged).
    The discovery-range variables go: with them rmw_fastrtps opens sockets of its own on 0.0.0.0
    beside the profile's."""
    if profile is None:
        return env
    if not Path(profile).is_file():
        raise FileNotFoundError(f"DDS profile {profile} does not exist")
    out = {k: v for k, v in env.items() if k not in _DDS_OVERRIDES}
    out["FASTDDS_DEFAULT_PROFILES_FILE"] = str(profile)
    return out


def executable(package: str, name: str, install_dir: Path | None = None) -> Path:
    """``install/<package>/lib/<package>/<name>`` (where ``ros2 run`` and launch_ros look)."""
    return Path(install_dir or default_install_dir()) / package / "lib" / package / name
