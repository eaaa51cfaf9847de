"""Policy actions -> joint position targets, batched, with the real arm's safety semantics.

The franka node runs every command through ``rlinf_robot.safety.SafetyFilter`` before the arm moves.
So that an action means the same in sim as on the arm, this module applies the same rules, vectorized
over N envs instead of one Python call per env:

* ``joint_delta``: target = measured q + delta; the delta is scaled down as a whole vector to the
  per-tick joint step; targets are clamped to the joint limits (with margin); a target whose TCP
  would leave the workspace box is pulled back along the move (the filter bisects with FK; here the
  TCP path is linearized through the Jacobian, exact to second order for one tick's step).
* ``ee_delta``: TCP target = measured TCP + dxyz (scaled to the per-tick step), orientation
  rotated by the world-frame rotation vector (scaled to the per-tick angle), clamped into the box;
  then one damped-least-squares step through the TCP Jacobian gives the joint target - the
  differential IK a Cartesian controller runs. Because the next tick starts from the *measured* pose,
  linearization error never accumulates.
* gripper column (when present): absolute finger width in metres, clamped to [0, 0.08].
"""

from __future__ import annotations

import numpy as np

from rlinf_robot.envs.spec import ACTION_MODES
from rlinf_robot.safety.limits import SafetyLimits
from sim.actions import GRIPPER_MAX_WIDTH, safe_action_spec

_IK_DAMPING = 1e-2  # lambda of the damped least squares solve (m / rad)


class ActionMapper:
    """Maps ``actions[N, A]`` to joint targets ``[N, 7]`` and gripper widths ``[N]`` (or None)."""

    def __init__(self, mode: str, gripper: bool, control_hz: float, limits: SafetyLimits | None = None):
        self.mode = mode
        self.gripper = gripper
        self.limits = limits or SafetyLimits.from_yaml()
        self.joint_step = self.limits.joint_step_limit(control_hz)
        self.ee_step, self.ee_step_rot = self.limits.ee_step_limit(control_hz)
        self._ee_limits = np.array([self.ee_step, self.ee_step_rot])
        self._damping = (_IK_DAMPING**2) * np.eye(6)
        self.q_lo, self.q_hi = self.limits.q_lo, self.limits.q_hi
        self.box_lo = np.asarray(self.limits.workspace_min, np.float64)
        self.box_hi = np.asarray(self.limits.workspace_max, np.float64)
        self.spec = safe_action_spec(mode, gripper, control_hz, self.limits)

    def noop(self, num_envs: int, width_now: np.ndarray | None = None) -> np.ndarray:
        """The action that holds still (delta 0, gripper at its current width)."""
        a = np.zeros((num_envs, self.spec.shape[0]), np.float32)
        if self.gripper:
            a[:, -1] = GRIPPER_MAX_WIDTH if width_now is None else width_now
        return a

    def targets(self, actions: np.ndarray, q: np.ndarray, tcp: np.ndarray, jac: np.ndarray):
        """``q[N,7]`` measured joints, ``tcp[N,3]`` measured TCP position, ``jac[N,6,7]`` TCP Jacobian
        (rows: linear xyz, angular xyz, world frame). Returns (joint targets [N,7], widths [N] | None)."""
        n7 = ACTION_MODES[self.mode]
        a = np.asarray(actions, np.float64)
        body = a[:, :n7]
        if self.mode == "joint_delta":
            target = self._joint_delta(body, q, tcp, jac)
        else:
            target = self._ee_delta(body, q, tcp, jac)
        width = np.clip(a[:, n7], 0.0, GRIPPER_MAX_WIDTH) if self.gripper else None
        return target, width

    # ----------------------------------------------------------------- modes
    def _joint_delta(self, delta, q, tcp, jac):
        ratio = np.max(np.abs(delta) / self.joint_step, axis=1, keepdims=True)
        delta = delta / np.maximum(ratio, 1.0)
        target = np.clip(q + delta, self.q_lo, self.q_hi)
        move = np.einsum("nij,nj->ni", jac[:, :3], target - q)  # linearized TCP displacement
        alpha = self._box_fraction(tcp, move)
        return q + alpha[:, None] * (target - q)

    def _ee_delta(self, body, q, tcp, jac):
        n = len(body)
        parts = body[:, :6].reshape(n, 2, 3)  # [dxyz, rotation vector]
        norms = np.sqrt(np.einsum("nij,nij->ni", parts, parts))
        err = (parts * np.minimum(1.0, self._ee_limits / np.maximum(norms, 1e-12))[:, :, None]).reshape(n, 6)
        goal = tcp + err[:, :3]
        if ((goal < self.box_lo) | (goal > self.box_hi)).any():  # rare: at the workspace boundary
            inside = np.all((tcp >= self.box_lo) & (tcp <= self.box_hi), axis=1)
            clipped = np.clip(goal, self.box_lo, self.box_hi)
            # Outside the box (only after a disturbance): accept only moves that reduce the violation.
            worse = self._violation(goal) >= self._violation(tcp)
            goal = np.where(inside[:, None], clipped, np.where(worse[:, None], tcp, goal))
            err[:, :3] = goal - tcp
            err[:, 3:] = np.where((~inside & worse)[:, None], 0.0, err[:, 3:])
        jt = jac.transpose(0, 2, 1)
        dq = jt @ np.linalg.solve(jac @ jt + self._damping, err[..., None])  # damped least squares
        return np.clip(q + dq[..., 0], self.q_lo, self.q_hi)

    # --------------------------------------------------------------- the box
    def _violation(self, p):
        return np.linalg.norm(np.maximum(self.box_lo - p, 0.0) + np.maximum(p - self.box_hi, 0.0), axis=1)

    def _box_fraction(self, p, move):
        """Largest alpha in [0, 1] with p + alpha * move inside the box (1 if it stays inside; for a
        TCP already outside: 1 if the move reduces the violation, else 0)."""
        end = p + move
        inside = np.all((p >= self.box_lo) & (p <= self.box_hi), axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where(end > self.box_hi, (self.box_hi - p) / move, 1.0)
            down = np.where(end < self.box_lo, (self.box_lo - p) / move, 1.0)
        alpha = np.clip(np.minimum(up, down).min(axis=1), 0.0, 1.0)
        better = self._violation(end) < self._violation(p)
        return np.where(inside, alpha, np.where(better, 1.0, 0.0))
