"""Offscreen camera images for N envs from one GL context (OSMesa on CPU machines).

One MjrContext (built from the first model) serves every env: randomized copies share meshes and
textures, and only values the scene reads per frame (colours, lights, camera poses) differ, which
``mjv_updateScene`` takes from each env's own model. Only the groups of the simplified geometry are
drawn (table, objects, markers, arm collision meshes) unless full meshes were asked for.
"""

from __future__ import annotations

import weakref

import numpy as np


class CameraRig:
    def __init__(self, model, cameras: tuple[str, ...], size: int, full_meshes: bool = False):
        import mujoco

        self._mj = mujoco
        self.size = size
        self.cameras = cameras
        self._gl = mujoco.GLContext(size, size)
        self._gl.make_current()
        self._ctx = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._ctx)
        self._scene = mujoco.MjvScene(model, maxgeom=200)
        self._opt = mujoco.MjvOption()
        groups = (0, 1, 2) if full_meshes else (0, 1, 3)
        self._opt.geomgroup[:] = [int(g in groups) for g in range(len(self._opt.geomgroup))]
        self._opt.sitegroup[:] = 0
        self._rect = mujoco.MjrRect(0, 0, size, size)
        self._cams = {}
        for name in cameras:
            cam = mujoco.MjvCamera()
            cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
            cam.fixedcamid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
            self._cams[name] = cam
        self._buf = np.empty((size, size, 3), np.uint8)
        # Free GL resources before interpreter teardown (GLContext.__del__ then fails noisily).
        self._finalizer = weakref.finalize(self, _free, self._ctx, self._gl)

    def render(self, models, datas) -> dict[str, np.ndarray]:
        """{camera: uint8[N, size, size, 3]} for the current state of every env."""
        mj = self._mj
        self._gl.make_current()
        n = len(datas)
        out = {name: np.empty((n, self.size, self.size, 3), np.uint8) for name in self.cameras}
        for i in range(n):
            for name, cam in self._cams.items():
                mj.mjv_updateScene(
                    models[i], datas[i], self._opt, None, cam, mj.mjtCatBit.mjCAT_ALL, self._scene
                )
                mj.mjr_render(self._rect, self._scene, self._ctx)
                mj.mjr_readPixels(self._buf, None, self._rect, self._ctx)
                out[name][i] = self._buf[::-1]  # GL rows start at the bottom
        return out

    def close(self) -> None:
        self._finalizer()


def _free(ctx, gl) -> None:
    ctx.free()
    gl.free()
