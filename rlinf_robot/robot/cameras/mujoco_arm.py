"""A simulated camera: the FR3 rendered by MuJoCo at the arm's current joint positions.

Used in sim mode so camera images follow the franka-sim arm. Only the simplified collision meshes
(geom group 3) are drawn, plus a box for the table: with OSMesa on a CPU that is ~1.5-4 ms per
96x96 frame, where the full visual meshes take ~50 ms (and a MuJoCo plane, with its grid and
reflections, ~30 ms).
"""

from __future__ import annotations

import os

import numpy as np

from rlinf_robot.errors import MissingDependency
from rlinf_robot.robot.cameras.base import Camera
from rlinf_robot.robot.franka.mjcf import load_fr3_spec

# A headless robot PC renders offscreen through OSMesa unless told otherwise; MuJoCo picks its GL
# backend when first imported (lazily, in ``open``), so the default is set here, before that.
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")

_COLLISION_GROUP = 3
_ARM_RGBA = (0.92, 0.92, 0.92, 1.0)
_TABLE_RGBA = (0.35, 0.38, 0.42, 1.0)


class MujocoArmCamera(Camera):
    needs_joint_positions = True

    def __init__(
        self,
        width: int = 96,
        height: int = 96,
        lookat=(0.35, 0.0, 0.3),
        distance: float = 1.4,
        azimuth: float = 145.0,
        elevation: float = -25.0,
    ):
        self.width, self.height = int(width), int(height)
        self.view = (tuple(float(x) for x in lookat), float(distance), float(azimuth), float(elevation))
        self._renderer = None

    def open(self) -> None:
        try:
            import mujoco
        except ImportError as exc:
            raise MissingDependency("mujoco", extra="sim") from exc
        spec = load_fr3_spec()
        for geom in spec.geoms:
            if geom.group == _COLLISION_GROUP:
                geom.rgba = _ARM_RGBA
        spec.worldbody.add_geom(
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[1.0, 1.0, 0.01],
            pos=[0.3, 0.0, -0.01],
            group=_COLLISION_GROUP,
            rgba=_TABLE_RGBA,
            contype=0,
            conaffinity=0,
        )
        model = spec.compile()
        model.vis.headlight.ambient[:] = 0.35
        model.vis.headlight.diffuse[:] = 0.5
        model.vis.quality.shadowsize = 0
        self._mujoco, self._model, self._data = mujoco, model, mujoco.MjData(model)
        self._renderer = mujoco.Renderer(model, self.height, self.width)
        self._option = mujoco.MjvOption()
        self._option.geomgroup[:] = 0
        self._option.geomgroup[_COLLISION_GROUP] = 1
        self._camera = mujoco.MjvCamera()
        lookat, self._camera.distance, self._camera.azimuth, self._camera.elevation = self.view
        self._camera.lookat[:] = lookat
        if model.nkey:
            self._data.qpos[:] = model.key_qpos[0]

    def read(self, joint_positions: np.ndarray | None = None) -> np.ndarray:
        """Render at ``joint_positions`` (7 arm joints, optionally + finger opening per finger)."""
        if self._renderer is None:
            raise OSError("camera not open")
        if joint_positions is not None:
            q = np.asarray(joint_positions, dtype=np.float64)
            n = min(q.shape[0], self._model.nq)
            self._data.qpos[:n] = q[:n]
            if q.shape[0] == 8 and self._model.nq >= 9:
                self._data.qpos[8] = q[7]  # both fingers open symmetrically
        self._mujoco.mj_kinematics(self._model, self._data)
        self._renderer.update_scene(self._data, camera=self._camera, scene_option=self._option)
        return self._renderer.render()

    def close(self) -> None:
        renderer, self._renderer = self._renderer, None
        if renderer is not None:
            renderer.close()
