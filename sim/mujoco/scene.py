"""Build the MuJoCo model of one task: FR3 + hand (from the franky-sim wheel) + table + task objects.

The scene template (assets/scene.xml) names the robot by absolute path at load time, so the meshes
stay in the installed wheel. Then MjSpec edits what the robot file cannot say:

* a ``tcp`` site 0.1034 m past the hand origin (the Franka Hand fingertip centre, the EE frame the
  safety filter and the real arm use) and a ``wrist`` camera on the hand;
* gravity compensation on the arm bodies, as the real FR3 does internally, so a joint target held
  constant means "stay here" in sim as on the arm;
* unless ``full_meshes``: the visual meshes are dropped and the (much coarser) collision meshes
  are drawn instead - 96x96 frames then cost ~1.5 ms instead of ~50 ms on OSMesa.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlinf_robot.paths import fr3_assets_dir

ASSETS = Path(__file__).resolve().parent / "assets"
TCP_OFFSET = 0.1034
ARM_BODIES = tuple(f"fr3_link{i}" for i in range(1, 8)) + ("hand", "left_finger", "right_finger")
ARM_JOINTS = tuple(f"fr3_joint{i}" for i in range(1, 8))
#: Colours of the coarse collision meshes when they stand in for the visual ones.
_COLLISION_RGBA = {"hand": (0.92, 0.92, 0.9, 1), "left_finger": (0.2, 0.2, 0.2, 1), "right_finger": (0.2, 0.2, 0.2, 1)}
#: The wrist camera, in the hand frame: beside the flange, looking past the fingertips (hand +z).
WRIST_CAMERA = {"pos": (0.07, 0.0, 0.03), "target": (0.0, 0.0, 0.2), "right": (0.0, 1.0, 0.0), "fovy": 75.0}


def look_at_xyaxes(pos, target, right_hint) -> list[float]:
    """MuJoCo camera ``xyaxes`` (image right, image up) for a camera at ``pos`` facing ``target``."""
    fwd = np.asarray(target, float) - np.asarray(pos, float)
    fwd /= np.linalg.norm(fwd)
    x = np.asarray(right_hint, float) - fwd * np.dot(right_hint, fwd)
    x /= np.linalg.norm(x)
    y = np.cross(-fwd, x)  # camera z is -forward; y = z x x
    return [*x.tolist(), *y.tolist()]


def scene_text(task_xml: str) -> str:
    """The scene MJCF with absolute paths filled in."""
    fr3 = fr3_assets_dir()
    text = (ASSETS / "scene.xml").read_text()
    return (
        text.replace("@FR3_XML@", str(fr3 / "fr3.xml"))
        .replace("@MESHDIR@", str(fr3 / "meshes"))
        .replace("@TASK_XML@", str(ASSETS / task_xml))
    )


def build_model(task_xml: str, full_meshes: bool = False):
    """Compile the model for ``task_xml`` (a file in assets/)."""
    import mujoco

    spec = mujoco.MjSpec.from_string(scene_text(task_xml))
    hand = spec.body("hand")
    hand.add_site(name="tcp", pos=[0, 0, TCP_OFFSET], size=[0.005, 0, 0], group=4)
    cam = hand.add_camera(name="wrist", pos=list(WRIST_CAMERA["pos"]), fovy=WRIST_CAMERA["fovy"])
    cam.alt.type = mujoco.mjtOrientation.mjORIENTATION_XYAXES
    cam.alt.xyaxes = look_at_xyaxes(WRIST_CAMERA["pos"], WRIST_CAMERA["target"], WRIST_CAMERA["right"])
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
