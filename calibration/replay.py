"""Replay recorded joint-velocity commands in the MuJoCo FR3 the way franka-sim executes them.

A system-identification residual only means something if sim and "real" differ by the dynamics
parameters and nothing else, so this mirrors franka-sim's MuJoCo backend (``mujoco_franka_sim``)
step for step: the model compiled with actuation disabled and gravity compensation on every body,
a 1 ms step, and a joint servo written to ``qfrc_applied``. Checked against franka-sim's own
backend stepping the same commands: equal to ~3e-12 rad (its MuJoCo 3.2, our 4.x; the test
requires 1e-6).

Why joint *velocity* commands: in position mode franka-sim damps against a commanded velocity it
differences from the targets as they arrive, so a command landing one physics step earlier or
later changes the torque by up to the 87 N m rail. Which step a command landed on is not
observable from the client, so position-mode replays carry ~1 mrad of timing noise. The velocity
servo ``tau = KV (dq_c - dq)`` has no differencing; a command one step off changes the torque by
``KV * ddq * dt`` (~2 N m for one step), and the replay matches to ~0.05 mrad.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.fr3_dynamics import PAYLOAD_BODY, DynamicsParams, apply_params, write_variant_mjcf
from rlinf_robot.robot.franka.model import JOINT_NAMES

DT = 0.001
#: franka-sim's velocity-servo gain per joint (N m per rad/s): the Menagerie FR3 actuator ``kv``.
KV = np.array([450.0, 450.0, 350.0, 350.0, 200.0, 200.0, 200.0])
#: franka-sim clips every joint torque to these (the FR3 datasheet torque limits).
TAU_MAX = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])


def compile_replay_model(mjcf: Path):
    """Compile ``mjcf`` the way franka-sim's ``build_model`` does (no hand graft)."""
    import mujoco

    spec = mujoco.MjSpec.from_file(str(mjcf))
    spec.option.timestep = DT
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_ACTUATION
    for body in spec.bodies:
        body.gravcomp = 1.0
    ground = spec.worldbody.add_geom()
    ground.name = "ground_plane"
    ground.type = mujoco.mjtGeom.mjGEOM_PLANE
    ground.size = [0.0, 0.0, 0.05]
    # Contacts off: an excitation inside the safety box never touches anything (a contact would
    # trip the arm's reflex anyway), and collision detection is half the cost of a step. Checked
    # on recorded runs: positions identical to 1e-16 rad with and without.
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    # franka-sim also sets margin == gap == 5 cm on the link geoms for its self-collision reflex;
    # under its MuJoCo 3.2 that adds no solver force, but MuJoCo 4 handles the pair margin
    # differently and would push the links apart, so the replay leaves margins alone.
    return spec.compile()


@dataclass
class Recording:
    """One excitation run, one row per controller cycle: measured ``q``/``dq`` and the command.

    ``dq_cmd[k]`` is the joint-velocity command the arm reported holding with state ``k`` (libfranka
    echoes it as ``dq_d``); ``t`` is the controller's clock in seconds.
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    dq_cmd: np.ndarray

    def __post_init__(self):
        self.t = np.asarray(self.t, dtype=np.float64).reshape(-1)
        n = len(self.t)
        for name in ("q", "dq", "dq_cmd"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            if arr.shape != (n, 7) or not np.all(np.isfinite(arr)):
                raise ValueError(f"Recording.{name} must be finite with shape ({n}, 7), got {arr.shape}")
            setattr(self, name, arr)
        if n < 2:
            raise ValueError("Recording needs at least 2 samples")

    def __len__(self) -> int:
        return len(self.t)

    def save(self, path: Path) -> None:
        np.savez_compressed(path, t=self.t, q=self.q, dq=self.dq, dq_cmd=self.dq_cmd)

    @classmethod
    def load(cls, path: Path) -> Recording:
        with np.load(path, allow_pickle=False) as z:
            return cls(t=z["t"], q=z["q"], dq=z["dq"], dq_cmd=z["dq_cmd"])

    def data_hash(self) -> str:
        h = hashlib.sha256()
        for arr in (self.t, self.q, self.dq, self.dq_cmd):
            h.update(np.ascontiguousarray(arr, dtype=np.float64).tobytes())
        return h.hexdigest()[:16]


class ServoReplay:
    """An FR3 that replays per-physics-step velocity commands under chosen dynamics parameters.

    ``ServoReplay(build_dir)`` compiles the FR3 as franka-sim does (with a payload body, so all
    four parameter groups can be set); ``ServoReplay.from_model(m)`` runs the same servo on any
    compiled model containing the FR3 - e.g. a training env's model after domain randomization,
    to ask how well *that* sim predicts the arm.
    """

    def __init__(self, build_dir: Path | None = None, params: DynamicsParams | None = None, model=None):
        import mujoco

        from calibration.fr3_dynamics import nominal_params

        self._mujoco = mujoco
        if model is None:
            if build_dir is None:
                raise ValueError("ServoReplay needs a build_dir (to write its model) or a compiled model")
            params = params or nominal_params()
            mjcf = write_variant_mjcf(params, Path(build_dir) / "replay_fr3.xml")
            model = compile_replay_model(mjcf)
        self.model = model
        self.data = mujoco.MjData(self.model)
        jid = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in JOINT_NAMES]
        if min(jid) < 0:
            raise ValueError(f"model lacks the FR3 joints {list(JOINT_NAMES)}")
        self.qpos_adr = np.array([self.model.jnt_qposadr[j] for j in jid])
        self.dof_adr = np.array([self.model.jnt_dofadr[j] for j in jid])
        self.payload_body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, PAYLOAD_BODY)
        self.params = params
        if params is not None:
            self.set_params(params)

    @classmethod
    def from_model(cls, model) -> ServoReplay:
        """Run franka-sim's servo on a copy of ``model`` (1 ms step, actuators and contacts off).

        The model's own dynamics parameters are kept; gravity compensation must already be on
        the arm bodies (it is in the training envs, as on the real FR3).
        """
        import copy

        import mujoco

        m = copy.copy(model)
        m.opt.timestep = DT
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ACTUATION) | int(
            mujoco.mjtDisableBit.mjDSBL_CONTACT
        )
        return cls(model=m)

    def set_params(self, params: DynamicsParams) -> None:
        if self.payload_body < 0:
            raise ValueError("this model has no payload body; its parameters are fixed (from_model)")
        apply_params(self.model, params, self.dof_adr, self.payload_body)
        self.params = params

    def run(self, q0: np.ndarray, dq0: np.ndarray, dq_cmd: np.ndarray) -> np.ndarray:
        """Simulate from (q0, dq0), applying ``dq_cmd[i]`` on physics step i; q after each step."""
        mj, m, d = self._mujoco, self.model, self.data
        mj.mj_resetData(m, d)
        qa, da = self.qpos_adr, self.dof_adr
        d.qpos[qa] = q0
        d.qvel[da] = dq0
        mj.mj_forward(m, d)
        out = np.empty((len(dq_cmd), 7))
        lo, hi = -TAU_MAX, TAU_MAX
        # Views and preallocated buffers: this loop is the whole cost of a fit.
        qpos, qvel, qfrc = self._views(d)
        kcmd = KV * np.asarray(dq_cmd, dtype=np.float64)
        tau = np.empty(7)
        step = mj.mj_step
        for i in range(len(kcmd)):
            np.multiply(KV, qvel(), out=tau)
            np.subtract(kcmd[i], tau, out=tau)
            qfrc(np.clip(tau, lo, hi, out=tau))
            step(m, d)
            out[i] = qpos()
        return out

    def _views(self, d):
        """Getters/setters for the arm's qpos, qvel and qfrc_applied (slices when contiguous)."""
        qa, da = self.qpos_adr, self.dof_adr
        if np.array_equal(qa, np.arange(7)) and np.array_equal(da, np.arange(7)):
            qp, qv, qf = d.qpos[:7], d.qvel[:7], d.qfrc_applied[:7]

            def set_f(x):
                qf[:] = x

            return (lambda: qp), (lambda: qv), set_f

        def set_f(x):
            d.qfrc_applied[da] = x

        return (lambda: d.qpos[qa]), (lambda: d.qvel[da]), set_f
