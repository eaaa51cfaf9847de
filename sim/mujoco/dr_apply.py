"""Write one env's sampled randomization (``DomainRandomization.sample``) into its MjModel copy.

Every value is set from the *nominal* model (captured once), never from the previous episode's,
so episodes do not drift and an env reset with the same params is bit-identical.

Two parameters need more than their own field, because of how MuJoCo combines values:

* ``object_friction``: a contact's sliding friction is the *larger* of its two geoms' (equal
  priorities), so scaling the object's geom alone would do nothing below 1 wherever its partner is
  at least as rough (the push block and the table are both 0.4). The object's geom and every geom
  it can touch (table, arm, fingers) are scaled together: each contact of the object gets ``s``
  times its nominal friction.
* ``color``: a geom with a material and the default rgba is drawn in the material's colour; the
  jitter is added to that colour (the table's brown), not to the default grey it would replace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlinf_robot.robot.franka.model import JOINT_NAMES
from rlinf_robot.rotations import quat_from_rotvec, quat_multiply
from sim.mujoco.scene import ARM_BODIES

#: MuJoCo's default geom rgba: a geom with a material and this rgba is drawn in the material's colour.
_DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)


@dataclass
class Nominal:
    """Indices and nominal values of everything randomization touches."""

    link_ids: np.ndarray
    dof_ids: np.ndarray
    hand_id: int
    object_body: int  # -1 when the task has no object
    object_geom: int
    object_partners: np.ndarray  # the object's geom and every geom it can collide with
    tinted_geoms: np.ndarray
    tint_rgba: np.ndarray  # their colour as drawn: the material's where the geom rgba is the default
    cam_ids: np.ndarray
    model_fields: dict[str, np.ndarray]

    @classmethod
    def capture(cls, model) -> Nominal:
        import mujoco

        def bid(name):
            return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)

        link_ids = np.array([bid(b) for b in ARM_BODIES[:8]])  # links 1-7 + hand (fingers stay)
        dof_ids = np.array(
            [model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in JOINT_NAMES]
        )
        obj = bid("object")
        obj_geom = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "object_geom")
        tinted = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "table")] + (
            [obj_geom] if obj_geom >= 0 else []
        )
        tint = model.geom_rgba[tinted].copy()
        for k, g in enumerate(tinted):
            mat = model.geom_matid[g]
            if mat >= 0 and np.allclose(model.geom_rgba[g], _DEFAULT_RGBA):
                tint[k] = model.mat_rgba[mat]
        partners = []
        if obj_geom >= 0:
            ct, ca, body = model.geom_contype, model.geom_conaffinity, model.geom_bodyid
            partners = [obj_geom] + [
                g
                for g in range(model.ngeom)
                if body[g] != body[obj_geom] and ((ct[g] & ca[obj_geom]) or (ct[obj_geom] & ca[g]))
            ]
        fields = {
            "body_mass": model.body_mass.copy(),
            "body_inertia": model.body_inertia.copy(),
            "dof_damping": model.dof_damping.copy(),
            "dof_frictionloss": model.dof_frictionloss.copy(),
            "dof_armature": model.dof_armature.copy(),
            "actuator_gainprm": model.actuator_gainprm.copy(),
            "actuator_biasprm": model.actuator_biasprm.copy(),
            "geom_friction": model.geom_friction.copy(),
            "geom_rgba": model.geom_rgba.copy(),
            "cam_pos": model.cam_pos.copy(),
            "cam_quat": model.cam_quat.copy(),
            "light_diffuse": model.light_diffuse.copy(),
        }
        return cls(
            link_ids,
            dof_ids,
            bid("hand"),
            obj,
            obj_geom,
            np.array(partners, np.int64),
            np.array(tinted),
            tint,
            np.arange(model.ncam),
            fields,
        )

    def restore(self, model) -> None:
        for name, value in self.model_fields.items():
            getattr(model, name)[:] = value


def apply(model, nominal: Nominal, params: dict[str, np.ndarray]) -> None:
    """Reset ``model`` to nominal, then apply ``params`` (absent keys keep nominal values)."""
    nominal.restore(model)
    nf = nominal.model_fields
    if "link_mass" in params:
        s = params["link_mass"]
        model.body_mass[nominal.link_ids] = nf["body_mass"][nominal.link_ids] * s
        model.body_inertia[nominal.link_ids] = nf["body_inertia"][nominal.link_ids] * s[:, None]
    for key, field in (
        ("joint_damping", "dof_damping"),
        ("joint_frictionloss", "dof_frictionloss"),
        ("joint_armature", "dof_armature"),
    ):
        if key in params:
            base = nf[field][nominal.dof_ids]
            getattr(model, field)[nominal.dof_ids] = (
                params[key] if params[key + "_kind"] else base * params[key]
            )
    if "payload_mass" in params:  # kg added to the hand, whatever the range kind (no nominal to scale)
        model.body_mass[nominal.hand_id] += float(params["payload_mass"][0])
    if "actuator_gain" in params:
        s = params["actuator_gain"]
        model.actuator_gainprm[:7, 0] = nf["actuator_gainprm"][:7, 0] * s
        model.actuator_biasprm[:7, 1] = nf["actuator_biasprm"][:7, 1] * s
        model.actuator_biasprm[:7, 2] = nf["actuator_biasprm"][:7, 2] * np.sqrt(s)  # keeps the damping ratio
    if nominal.object_body >= 0:
        if "object_mass" in params:
            s = float(params["object_mass"][0])
            model.body_mass[nominal.object_body] = nf["body_mass"][nominal.object_body] * s
            model.body_inertia[nominal.object_body] = nf["body_inertia"][nominal.object_body] * s
        if "object_friction" in params:  # sliding friction of the object and its partners (module docstring)
            geoms = nominal.object_partners
            model.geom_friction[geoms, 0] = nf["geom_friction"][geoms, 0] * float(
                params["object_friction"][0]
            )
    model.cam_pos[:] = nf["cam_pos"] + params["camera_pos"]
    dq = quat_from_rotvec(params["camera_rot"])
    model.cam_quat[nominal.cam_ids] = quat_multiply(dq, nf["cam_quat"][nominal.cam_ids])
    if "light" in params:
        model.light_diffuse[:] = float(params["light"])
    if np.any(params["color"] != 0):
        rgb = np.clip(nominal.tint_rgba[:, :3] + params["color"], 0.0, 1.0)
        model.geom_rgba[nominal.tinted_geoms, :3] = rgb
        model.geom_rgba[nominal.tinted_geoms, 3] = nominal.tint_rgba[:, 3]
