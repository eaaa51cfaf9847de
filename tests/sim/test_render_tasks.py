"""tools/render_tasks.py draws the README pictures: check it yields real PNGs of the scene."""

from __future__ import annotations

import importlib.util
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("render_tasks", ROOT / "tools" / "render_tasks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _read_png(path: Path) -> np.ndarray:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + 3 * w)
    return rows[:, 1:].reshape(h, w, 3)


@pytest.mark.slow
def test_render_writes_the_scene_as_png(tmp_path):
    tool = _tool()
    image = tool.render("mujoco/fr3-lift", size=64)
    assert image.shape == (64, 128, 3) and image.dtype == np.uint8
    out = tmp_path / "lift.png"
    tool.write_png(out, image)
    np.testing.assert_array_equal(_read_png(out), image)
    assert image.std() > 10  # a scene, not a blank frame
    # The orange block shows up in the wrist view (right half) of the lift picture.
    wrist = image[:, 64:].astype(int)
    orange = (wrist[..., 0] > 150) & (wrist[..., 1] > 60) & (wrist[..., 2] < 80)
    assert orange.mean() > 0.02
