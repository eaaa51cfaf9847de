"""Sim tests: offscreen rendering through OSMesa with a private shader cache, no asset prompts."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("MESA_SHADER_CACHE_DIR", tempfile.mkdtemp(prefix="mesa-cache-"))
os.environ.setdefault("MS_SKIP_ASSET_DOWNLOAD_PROMPT", "1")


def pytest_configure(config):
    # ManiSkill 3.0 / SAPIEN call APIs numpy 2 and logging deprecate; not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:mani_skill.*")
    config.addinivalue_line("filterwarnings", "ignore:Failed to find system libvulkan:UserWarning")
