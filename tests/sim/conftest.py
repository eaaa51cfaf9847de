"""Sim tests: offscreen rendering through OSMesa with a private shader cache, no asset prompts."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("MESA_SHADER_CACHE_DIR", tempfile.mkdtemp(prefix="mesa-cache-"))
os.environ.setdefault("MS_SKIP_ASSET_DOWNLOAD_PROMPT", "1")
