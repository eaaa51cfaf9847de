"""Render one picture per embedded MuJoCo task into docs/images/ (front view | wrist view).

Each task is run by its scripted expert to a moment that shows what the task is (reach: the goal in
view, push: the block on its way, lift: the block in the air), then drawn with the full visual meshes.
Usage: .venv/bin/python tools/render_tasks.py [--out docs/images] [--size 320]
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import zlib
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import sim  # noqa: E402
from sim.mujoco.experts import expert_for  # noqa: E402

#: Expert steps before the picture is taken, per task.
MOMENTS = {"mujoco/fr3-reach": 6, "mujoco/fr3-push": 14, "mujoco/fr3-lift": 40}


def write_png(path: Path, rgb: np.ndarray) -> None:
    """Minimal PNG encoder (8-bit RGB, no filter), so the script needs nothing beyond numpy."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[row].tobytes() for row in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    path.write_bytes(png)


def render(name: str, size: int, seed: int = 3) -> np.ndarray:
    env = sim.make(name, num_envs=1, full_meshes=True, terminate_on_success=False)
    try:
        obs = env.reset(seed=seed)
        expert = expert_for(name)
        for _ in range(MOMENTS[name]):
            obs = env.step(expert(env, obs))[0]
        front = env.render("front", size)
        wrist = env.render("wrist", size)
        return np.concatenate([front, wrist], axis=1)
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--size", type=int, default=320)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in MOMENTS:
        path = args.out / f"{name.split('/')[1]}.png"
        write_png(path, render(name, args.size))
        print(f"{name}: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    main()
