"""Build the MuJoCo model of one task: FR3 + hand (from the franky-sim wheel) + table + task objects.

The robot comes from the one FR3 loader (``rlinf_robot.robot.franka.mjcf``), which includes
assets/scene.xml and the task's file after it, so the meshes stay in the installed wheel. Then
MjSpec edits what the robot file cannot say:

* a ``tcp`` site ``TCP_OFFSET`` past the hand origin (the Franka Hand fingertip centre, the EE frame
  of ``rlinf_robot.robot.franka.model``, the safety filter and the real arm) and a ``wrist`` camera
  on the hand;
* gravity compensation on the arm bodies, as the real FR3 does internally, so a joint target held
  constant means "stay here" in sim as on the arm;
* unless ``full_meshes``: the visual meshes are dropped and the (much coarser) collision meshes
  are drawn instead - 96x96 frames then cost ~1.5 ms instead of ~50 ms on OSMesa.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlinf_robot.robot.franka.mjcf import CV_TO_MJ, load_fr3_spec
from rlinf_robot.robot.franka.model import TCP_OFFSET

ASSETS = Path(__file__).resolve().parent / "assets"
ARM_BODIES = tuple(f"fr3_link{i}" for i in range(1, 8)) + ("hand", "left_finger", "right_finger")
#: Colours of the coarse collision meshes when they stand in for the visual ones.
_COLLISION_RGBA = {
    "hand": (0.92, 0.92, 0.9, 1),
    "left_finger": (0.2, 0.2, 0.2, 1),
    "right_finger": (0.2, 0.2, 0.2, 1),
}
#: The wrist camera, in the hand frame: beside the flange, looking past the fingertips (hand +z).
#: 100 degrees of vertical view (not 75): the ball starts in its view at 56 % of reach starts instead
#: of 37 %, and every reach miss of a pixel policy began with the ball outside it (docs/learning.md).
WRIST_CAMERA = {"pos": (0.07, 0.0, 0.03), "target": (0.0, 0.0, 0.2), "right": (0.0, 1.0, 0.0), "fovy": 100.0}


def look_at_xyaxes(pos, target, right_hint) -> list[float]:
    """MuJoCo camera ``xyaxes`` (image right, image up) for a camera at ``pos`` facing ``target``."""
    fwd = np.asarray(target, float) - np.asarray(pos, float)
    fwd /= np.linalg.norm(fwd)
    x = np.asarray(right_hint, float) - fwd * np.dot(right_hint, fwd)
    x /= np.linalg.norm(x)
    y = np.cross(-fwd, x)  # camera z is -forward; y = z x x
    return [*x.tolist(), *y.tolist()]


#: The frame a calibrated camera pose is given in: the wrist camera rides on the TCP (hand-eye,
#: eye-in-hand), the front camera stands in the base frame (eye-to-hand).
CAMERA_FRAMES = {"wrist": "tcp", "front": "base"}


def place_camera(spec, name: str, pose: np.ndarray, fovy: float | None = None) -> None:
    """Put camera ``name`` at ``pose`` (4x4, OpenCV axes, in ``CAMERA_FRAMES[name]``: what hand-eye
    calibration reports) with vertical field of view ``fovy`` (degrees; None keeps the model's)."""
    import mujoco

    from rlinf_robot.rotations import quat_from_matrix

    pose = np.asarray(pose, dtype=np.float64)
    if CAMERA_FRAMES[name] == "tcp":  # the camera is the hand's child; the TCP is TCP_OFFSET along z
        pose = pose.copy()
        pose[2, 3] += TCP_OFFSET
    cam = spec.camera(name)
    cam.alt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT
    cam.pos = pose[:3, 3].tolist()
    cam.quat = quat_from_matrix(pose[:3, :3] @ CV_TO_MJ).tolist()
    if fovy is not None:
        cam.fovy = float(fovy)


def fixed_camera_poses(model) -> dict[str, np.ndarray]:
    """The scene's world-fixed cameras (``front``, wherever ``camera_poses`` placed it): name -> 4x4
    pose in the base frame with OpenCV axes, the convention hand-eye calibration reports. Read from
    the compiled model, so a task measuring through a camera uses the camera the sim renders."""
    import mujoco

    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    mujoco.mj_camlight(model, data)  # camera poses are not part of mj_kinematics
    out = {}
    for c in range(model.ncam):
        if model.cam_bodyid[c] != 0:
            continue  # rides on a body (the wrist camera): not fixed in the base frame
        pose = np.eye(4)
        pose[:3, :3] = data.cam_xmat[c].reshape(3, 3) @ CV_TO_MJ.T
        pose[:3, 3] = data.cam_xpos[c]
        out[mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, c)] = pose
    return out


def build_model(task_xml: str, full_meshes: bool = False, camera_poses: dict | None = None):
    """Compile the model for ``task_xml`` (a file in assets/); ``camera_poses``: cameras placed where
    calibration found the real ones (``{name: {"pose": 4x4, "fovy": deg}}``, see ``place_camera``)."""
    import mujoco

    spec = load_fr3_spec([ASSETS / "scene.xml", ASSETS / task_xml])
    hand = spec.body("hand")
    hand.add_site(name="tcp", pos=[0, 0, TCP_OFFSET], size=[0.005, 0, 0], group=4)
    cam = hand.add_camera(name="wrist", pos=list(WRIST_CAMERA["pos"]), fovy=WRIST_CAMERA["fovy"])
    cam.alt.type = mujoco.mjtOrientation.mjORIENTATION_XYAXES
    cam.alt.xyaxes = look_at_xyaxes(WRIST_CAMERA["pos"], WRIST_CAMERA["target"], WRIST_CAMERA["right"])
    for name, placed in (camera_poses or {}).items():
        place_camera(spec, name, np.asarray(placed["pose"]), placed.get("fovy"))
    for name in ARM_BODIES:
        spec.body(name).gravcomp = 1.0
    if not full_meshes:
        for geom in list(spec.geoms):
            if geom.group == 2 and geom.type == mujoco.mjtGeom.mjGEOM_MESH:
                spec.delete(geom)
        used = {g.meshname for g in spec.geoms}
        for mesh in list(spec.meshes):
            if mesh.name not in used:
                spec.delete(mesh)
        for geom in spec.geoms:
            if geom.group == 3:
                body = geom.parent.name
                geom.rgba = list(_COLLISION_RGBA.get(body, (0.86, 0.86, 0.84, 1)))
    return spec.compile()
