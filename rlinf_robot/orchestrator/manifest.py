"""A run's manifest: what produced it, so a result can be traced and reproduced (package versions,
git commit, the composed config's hash, the robots and the calibration records it used)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import subprocess
import time
from typing import Any

from rlinf_robot.paths import REPO_ROOT

PACKAGES = (
    "rlinf-robot",
    "torch",
    "ray",
    "mujoco",
    "numpy",
    "hydra-core",
    "wandb",
    "franky-control",
    "pyzmq",
)


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _git() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
        )
        return {"commit": commit or "unknown", "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": None}


def manifest(config_yaml: str, endpoints: list[str], calibration_ids: list[str]) -> dict[str, Any]:
    return {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config_hash": hashlib.sha256(config_yaml.encode()).hexdigest()[:16],
        "git": _git(),
        "packages": {p: _version(p) for p in PACKAGES},
        "python": platform.python_version(),
        "host": platform.node(),
        "robots": list(endpoints),
        "calibration_ids": list(calibration_ids),
    }
