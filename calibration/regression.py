"""A fast first estimate of the dynamics parameters by linear least squares on the equations of motion.

Simulation-error fitting (``calibration.sysid``) is accurate but needs a starting point near the
answer - from the model's nominal damping it crawls. The equations of motion are *linear* in
the parameters, so one regression gets close. For every lockstep interval (one physics step
between two recorded states), MuJoCo's implicit-in-damping step reads

    (M(q) + dt D) a + D v + F sign(v) = tau - c(q, v),        a = (v' - v) / dt

with ``M = M_rigid + diag(A) + m M_p`` and ``c = c_rigid + m c_p`` (a point payload enters the
mass matrix and the Coriolis terms linearly), ``tau`` the servo torque ``clip(KV (u - v))``
and gravity compensated. Rearranged per joint j:

    D_j (v_j + dt a_j) + A_j a_j + F_j sign(v_j) + m (M_p a + c_p)_j = tau_j - (M_rigid a + c_rigid)_j

Samples where a joint creeps (|v| small: dry friction sticks there and ``sign`` lies) are
dropped from that joint's equations.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from calibration.alignment import estimate_steps
from calibration.fr3_dynamics import DynamicsParams, apply_params, nominal_params
from calibration.replay import DT, KV, TAU_MAX, Recording, ServoReplay

MIN_SPEED = 0.03  # rad/s


def _rigid_terms(replay: ServoReplay, payload_kg: float, q: np.ndarray, v: np.ndarray, a: np.ndarray):
    """(M a + c) per sample for the arm with zero damping/armature/friction and ``payload_kg``."""
    import mujoco

    m = copy.copy(replay.model)
    m.opt.gravity[:] = 0.0  # gravity is compensated on the arm; c is Coriolis/centrifugal only
    params = nominal_params().replace(
        joint_damping=np.zeros(7),
        joint_frictionloss=np.zeros(7),
        joint_armature=np.zeros(7),
        payload_mass=[payload_kg],
    )
    apply_params(m, params, replay.dof_adr, replay.payload_body)
    d = mujoco.MjData(m)
    acc = np.zeros(m.nv)
    ma = np.zeros(m.nv)
    out = np.empty_like(q)
    qa, da = replay.qpos_adr, replay.dof_adr
    for k in range(len(q)):
        d.qpos[qa] = q[k]
        d.qvel[:] = 0.0
        d.qvel[da] = v[k]
        mujoco.mj_forward(m, d)
        acc[da] = a[k]
        mujoco.mj_mulM(m, d, ma, acc)
        out[k] = ma[da] + d.qfrc_bias[da]
    return out


def regression_estimate(recordings: Sequence[Recording], replay: ServoReplay) -> DynamicsParams:
    """Least-squares parameters from lockstep intervals of ``recordings`` (see module docstring)."""
    qs, vs, accs, taus = [], [], [], []
    for rec in recordings:
        timeline = estimate_steps(rec.q, rec.dq)
        index = timeline.index
        lockstep = np.flatnonzero((timeline.steps == 1) & (timeline.fit < 0.05))
        lockstep = lockstep[lockstep >= 1]
        if not len(lockstep):
            continue
        which = np.searchsorted(index + 1, index[lockstep], side="right") - 1
        u = rec.dq_cmd[np.clip(which, 0, len(rec) - 1)]
        v = rec.dq[lockstep]
        qs.append(rec.q[lockstep])
        vs.append(v)
        accs.append((rec.dq[lockstep + 1] - v) / DT)
        taus.append(np.clip(KV * (u - v), -TAU_MAX, TAU_MAX))
    if not qs:
        raise ValueError("no lockstep intervals to regress on")
    q, v, a, tau = (np.concatenate(x) for x in (qs, vs, accs, taus))
    rigid0 = _rigid_terms(replay, 0.0, q, v, a)
    per_kg = _rigid_terms(replay, 1.0, q, v, a) - rigid0
    y = tau - rigid0
    rows, rhs = [], []
    for j in range(7):
        moving = np.abs(v[:, j]) > MIN_SPEED
        block = np.zeros((int(moving.sum()), 22))
        block[:, j] = (v[:, j] + DT * a[:, j])[moving]  # damping
        block[:, 7 + j] = np.sign(v[moving, j])  # frictionloss
        block[:, 14 + j] = a[moving, j]  # armature
        block[:, 21] = per_kg[moving, j]  # payload
        rows.append(block)
        rhs.append(y[moving, j])
    x, *_ = np.linalg.lstsq(np.concatenate(rows), np.concatenate(rhs), rcond=None)
    return DynamicsParams(
        joint_damping=np.clip(x[:7], 0.0, None),
        joint_frictionloss=np.clip(x[7:14], 0.0, None),
        joint_armature=np.clip(x[14:21], 0.02, None),
        payload_mass=[max(float(x[21]), 0.0)],
    )
