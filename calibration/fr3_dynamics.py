"""The FR3's identifiable dynamics parameters and the MJCF variants that carry them.

System identification fits four things a joint-space tracking error can see: per-joint viscous
damping, dry friction (MuJoCo ``frictionloss``), rotor inertia (``armature``) and one payload mass
at the hand. ``DynamicsParams`` holds them as plain arrays; ``write_variant_mjcf`` writes an FR3
model carrying a given set (the "deliberately different" arm franka-sim serves in tests), and
``apply_params`` pokes them into a compiled model (the replay side), so both ends of a fit agree on
what a parameter means.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.mjcf import fr3_assets_dir
from rlinf_robot.robot.franka.model import JOINT_NAMES

#: Where the payload sits: a point mass at the hand's centre of mass. That is what
#: ``sim/mujoco/dr_apply.py`` does with ``payload_mass`` (kg added to the hand body), so a fitted
#: mass means the same thing in the training sim as in the fit.
PAYLOAD_BODY = "payload"
PAYLOAD_PARENT = "hand"
PAYLOAD_POS = (-0.01, 0.0, 0.03)
#: Rotational inertia per kg (kg m^2): next to nothing, a point mass (MuJoCo needs it positive).
PAYLOAD_INERTIA_PER_KG = 1e-6
#: Order of the flat parameter vector the optimiser sees.
PARAM_KEYS = ("joint_damping", "joint_frictionloss", "joint_armature", "payload_mass")
PARAM_WIDTH = {"joint_damping": 7, "joint_frictionloss": 7, "joint_armature": 7, "payload_mass": 1}


@dataclass
class DynamicsParams:
    """Per-joint damping (N m s/rad), frictionloss (N m), armature (kg m^2), payload (kg)."""

    joint_damping: np.ndarray
    joint_frictionloss: np.ndarray
    joint_armature: np.ndarray
    payload_mass: np.ndarray = field(default_factory=lambda: np.zeros(1))

    def __post_init__(self):
        for key in PARAM_KEYS:
            arr = np.asarray(getattr(self, key), dtype=np.float64).reshape(-1)
            if arr.shape != (PARAM_WIDTH[key],) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ConfigError(f"{key} needs {PARAM_WIDTH[key]} finite values >= 0, got {arr.tolist()}")
            setattr(self, key, arr)

    def to_vector(self) -> np.ndarray:
        return np.concatenate([getattr(self, k) for k in PARAM_KEYS])

    @classmethod
    def from_vector(cls, x: np.ndarray) -> DynamicsParams:
        x = np.asarray(x, dtype=np.float64)
        out, i = {}, 0
        for key in PARAM_KEYS:
            out[key] = x[i : i + PARAM_WIDTH[key]]
            i += PARAM_WIDTH[key]
        return cls(**out)

    def to_dict(self) -> dict[str, list[float]]:
        return {k: getattr(self, k).tolist() for k in PARAM_KEYS}

    @classmethod
    def from_dict(cls, raw: dict) -> DynamicsParams:
        missing = [k for k in PARAM_KEYS if k not in raw]
        if missing:
            raise ConfigError(f"dynamics params missing {missing}")
        return cls(**{k: raw[k] for k in PARAM_KEYS})

    def replace(self, **changes) -> DynamicsParams:
        return DynamicsParams(**{**{k: getattr(self, k) for k in PARAM_KEYS}, **changes})


def _joint_values(root: ET.Element) -> dict[str, dict[str, float]]:
    """Effective damping/armature/frictionloss per arm joint: joint attribute, else the class default."""
    default = root.find("./default/default[@class='fr3']/joint")
    base = {k: float(default.get(k, 0.0)) for k in ("damping", "armature", "frictionloss")}
    out = {}
    for joint in root.iter("joint"):
        name = joint.get("name")
        if name in JOINT_NAMES:
            out[name] = {k: float(joint.get(k, base[k])) for k in base}
    return out


def nominal_params(assets: Path | None = None) -> DynamicsParams:
    """The parameters the shipped FR3 model carries (what an un-identified sim uses)."""
    root = ET.parse(Path(assets or fr3_assets_dir()) / "fr3.xml").getroot()
    vals = _joint_values(root)
    return DynamicsParams(
        joint_damping=[vals[j]["damping"] for j in JOINT_NAMES],
        joint_frictionloss=[vals[j]["frictionloss"] for j in JOINT_NAMES],
        joint_armature=[vals[j]["armature"] for j in JOINT_NAMES],
        payload_mass=[0.0],
    )


def write_variant_mjcf(params: DynamicsParams, dest: Path, assets: Path | None = None) -> Path:
    """Write a full FR3 MJCF with ``params`` baked in and a payload body at the hand.

    A copy rather than an include-wrapper because the parameters live on the included file's joint
    elements. The payload body is always present (mass 0 -> a 1 g placeholder) so that variant and
    replay models have the same bodies. ``meshdir`` is made absolute so the file loads from anywhere.
    """
    assets = Path(assets or fr3_assets_dir())
    tree = ET.parse(assets / "fr3.xml")
    root = tree.getroot()
    compiler = root.find("compiler")
    compiler.set("meshdir", str(assets / "meshes"))
    for joint in root.iter("joint"):
        name = joint.get("name")
        if name in JOINT_NAMES:
            i = JOINT_NAMES.index(name)
            joint.set("damping", repr(float(params.joint_damping[i])))
            joint.set("armature", repr(float(params.joint_armature[i])))
            joint.set("frictionloss", repr(float(params.joint_frictionloss[i])))
    hand = next(b for b in root.iter("body") if b.get("name") == PAYLOAD_PARENT)
    mass = max(float(params.payload_mass[0]), 1e-3)
    payload = ET.SubElement(hand, "body", name=PAYLOAD_BODY, pos=" ".join(map(str, PAYLOAD_POS)))
    inertia = mass * PAYLOAD_INERTIA_PER_KG
    ET.SubElement(
        payload, "inertial", pos="0 0 0", mass=repr(mass), diaginertia=f"{inertia} {inertia} {inertia}"
    )
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    tree.write(tmp)
    tmp.replace(dest)
    return dest


def apply_params(model, params: DynamicsParams, arm_dofs: np.ndarray, payload_body: int) -> None:
    """Set ``params`` on a compiled MuJoCo model in place (no recompile).

    Payload mass and its inertia are body fields read every step, and the body was compiled with
    gravity compensation, so changing the mass changes inertia and Coriolis terms only - exactly
    what franka-sim's gravity-compensated arm feels.
    """
    model.dof_damping[arm_dofs] = params.joint_damping
    model.dof_frictionloss[arm_dofs] = params.joint_frictionloss
    model.dof_armature[arm_dofs] = params.joint_armature
    mass = max(float(params.payload_mass[0]), 1e-3)
    model.body_mass[payload_body] = mass
    model.body_inertia[payload_body] = mass * PAYLOAD_INERTIA_PER_KG


def reality_gap_params(assets: Path | None = None) -> DynamicsParams:
    """A deliberately different FR3 for tests and demos: the "real" arm franka-sim serves.

    Damping far above the model's 0.21 N m s/rad (30 on joints 1-4, 5 on the wrist; franka-sim
    serves it through ``FR3_JOINT_DAMPING``), 1.5x the dry friction, 1.3x the rotor inertia and a
    1.5 kg payload (both through the variant MJCF).
    """
    nom = nominal_params(assets)
    return nom.replace(
        joint_damping=[30.0, 30.0, 30.0, 30.0, 5.0, 5.0, 5.0],
        joint_frictionloss=nom.joint_frictionloss * 1.5,
        joint_armature=nom.joint_armature * 1.3,
        payload_mass=[1.5],
    )
