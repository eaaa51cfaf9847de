"""Delta actions -> joint targets: the one rule the simulators and the arm share.

A chunk of ``joint_delta`` / ``ee_delta`` rows is a *path*: row ``k`` is relative to row ``k-1``'s
joint target, and row 0 is relative to the **anchor**, the last joint target commanded to the arm.
Why the commanded target and not the measured position, nor the state in the observation the chunk
was computed from:

* Measured: adding each row to where the arm *is* when the row runs makes what a chunk does depend
  on the control rate and on how far the servo lags (on franka-sim a chunk moved 0.75-0.81x its row
  sum at 10 Hz and 0.21-0.23x at 50 Hz), which no policy trained in sim can know.
* Observed: anchoring at a stale observation drives the target *back* to where the arm was when the
  observation was taken, at every chunk boundary of a moving arm (a reverted attempt swung the
  wrist and wandered off under CPU load).
* Commanded: rows and consecutive chunks compose exactly (H one-row chunks = one H-row chunk), the
  motion a chunk commands does not depend on rate, latency or lag, and the arm's lag shows where a
  policy can see it, in the observed joint positions and velocities. The sims' servos track a
  target within a tick, so there all three rules nearly coincide; on a lagging arm only this one
  keeps a chunk's displacement equal to its row sum.

The anchor may lead the measured position by at most ``max_target_lead`` (rad, on any joint; the
limits YAML): an arm that is blocked or slower than its commands does not wind the target up.
While the arm keeps within that lead a chunk moves it by exactly its row sum; beyond it, rows
start from nearer the arm (and the bridge counts ``lead_clamped``), on the line from the arm to
the last target: the lead is scaled as a whole, so a slow joint slows the motion without bending it.

Each row is one step from the previous target, bounded the way the safety filter bounds a tick:
``joint_delta`` rows are scaled down as a whole to the per-tick joint step; ``ee_delta`` rows
(dxyz in m and a rotation vector in rad, both in the base frame) to the per-tick TCP step and
angle, the TCP target is slid along the workspace box, and a few damped-least-squares iterations
from the previous target's joints reach that pose (the joint step capped to the joints' velocity
budget per tick). Targets are clamped to the joint limits, and a target whose TCP would leave the
box is pulled back along the step (bisection on exact forward kinematics). A rotation that a
joint limit blocks is lost, never wound up: the next row starts from the target actually reached.
The optional gripper column is an absolute finger opening, clamped to the gripper's range.

Pure numpy and batched over N envs (the sims plan all envs at once; the bridge plans N = 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlinf_robot.robot.franka import model
from rlinf_robot.rotations import rotvec_to_matrix
from rlinf_robot.safety.limits import SafetyLimits

#: Base width of each delta mode's rows (without the gripper column).
DELTA_WIDTH = {"joint_delta": 7, "ee_delta": 6}
_IK_DAMPING = 1e-2  # lambda of the damped least squares step (m / rad)
_NEWTON_STEPS = 3  # extra DLS iterations per ee row, at most: one step leaves ~1 mm of a 2 cm step
_POSE_TOL = 1e-6  # m / rad: the row's pose is reached when the error is below this (a micron)
_BISECTION_STEPS = 14


@dataclass(frozen=True)
class DeltaPlan:
    """Joint targets of every row, and what the rule had to change (per env and row)."""

    targets: np.ndarray  # [N, H, 7]
    widths: np.ndarray | None  # [N, H] finger opening (m), or None without a gripper column
    scaled: np.ndarray  # [N, H] bool: the row was larger than one tick allows and was scaled down
    clamped: np.ndarray  # [N, H] bool: a joint limit, the workspace box or the gripper range cut it

    @property
    def horizon(self) -> int:
        return int(self.targets.shape[1])


class DeltaRule:
    """``plan(anchor, rows)`` turns delta rows into joint targets (see the module docstring)."""

    def __init__(
        self,
        mode: str,
        gripper: bool,
        control_hz: float,
        limits: SafetyLimits | None = None,
        max_lead: float | None = None,
    ):
        if mode not in DELTA_WIDTH:
            raise ValueError(f"delta mode {mode!r} not in {sorted(DELTA_WIDTH)}")
        if not control_hz > 0:
            raise ValueError(f"control_hz must be positive, got {control_hz}")
        self.mode, self.gripper, self.control_hz = mode, bool(gripper), float(control_hz)
        self.limits = limits or SafetyLimits.from_yaml()
        self.width = DELTA_WIDTH[mode] + int(self.gripper)
        self.max_lead = float(self.limits.max_target_lead if max_lead is None else max_lead)
        self.joint_step = np.asarray(self.limits.joint_step_limit(control_hz), np.float64)
        # An ee row's joint step is bounded by the joints' velocity budget per tick only: the
        # per-tick cap on joint_delta actions (max_joint_step) would shrink feasible TCP steps.
        self.ee_joint_step = self.limits.joint_velocity_max * self.limits.velocity_scale / self.control_hz
        self.ee_step, self.rot_step = self.limits.ee_step_limit(control_hz)
        self.q_lo, self.q_hi = self.limits.q_lo, self.limits.q_hi
        self.box_lo = np.asarray(self.limits.workspace_min, np.float64)
        self.box_hi = np.asarray(self.limits.workspace_max, np.float64)
        self.tcp_offset = float(self.limits.tcp_offset)

    # ------------------------------------------------------------------ anchor
    def anchor(self, last_target: np.ndarray | None, measured: np.ndarray) -> np.ndarray:
        """Row 0's reference: the last commanded target, at most ``max_lead`` from ``measured``
        (the measured joints when nothing valid was commanded: after a reset, hold or fault)."""
        measured = np.asarray(measured, np.float64)
        if last_target is None:
            return measured.copy()
        lead = np.asarray(last_target, np.float64) - measured
        # scaled as a whole, not clipped per joint: clipping only the lagging joints (a loaded
        # shoulder) turns the rest of the path, and the arm heads somewhere the policy never asked
        largest = np.max(np.abs(lead), axis=-1, keepdims=True)
        return measured + lead * np.minimum(1.0, self.max_lead / np.maximum(largest, 1e-12))

    def lead_exceeded(self, last_target: np.ndarray | None, measured: np.ndarray) -> bool:
        """Whether ``anchor`` had to pull the last target back towards the arm."""
        if last_target is None:
            return False
        lead = np.abs(np.asarray(last_target, np.float64) - np.asarray(measured, np.float64))
        return bool(np.any(lead > self.max_lead))

    # ------------------------------------------------------------------ plan
    def plan(self, anchor: np.ndarray, rows: np.ndarray) -> DeltaPlan:
        """``anchor`` [N, 7] (or [7]), ``rows`` [N, H, width] (or [H, width]) -> ``DeltaPlan``."""
        single = np.ndim(rows) == 2
        a = np.asarray(rows, np.float64)
        q = np.asarray(anchor, np.float64)
        if single:
            a, q = a[None], q[None]
        n, horizon, width = a.shape
        if width != self.width or q.shape != (n, 7):
            raise ValueError(
                f"{self.mode} rows must be [N, H, {self.width}] with anchor [N, 7]; "
                f"got {a.shape} and {q.shape}"
            )
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(q))):
            raise ValueError("NaN or inf in delta rows or anchor")
        fast = self._joint_rows_in_box(q, a[:, :, :7]) if self.mode == "joint_delta" else None
        if fast is not None:
            targets, scaled, clamped, kin = fast
            q = targets[:, -1]
        else:
            targets = np.empty((n, horizon, 7))
            scaled = np.zeros((n, horizon), bool)
            clamped = np.zeros((n, horizon), bool)
            step = self._joint_row if self.mode == "joint_delta" else self._ee_row
            kin = self._kinematics(q)
            for h in range(horizon):
                q, kin, scaled[:, h], clamped[:, h] = step(q, kin, a[:, h, : DELTA_WIDTH[self.mode]])
                targets[:, h] = q
        self._cache = (q.copy(), kin)
        widths = None
        if self.gripper:
            raw = a[:, :, -1]
            widths = np.clip(raw, self.limits.gripper_width_min, self.limits.gripper_width_max)
            clamped |= widths != raw
        if single:
            return DeltaPlan(targets[0], None if widths is None else widths[0], scaled[0], clamped[0])
        return DeltaPlan(targets, widths, scaled, clamped)

    def _kinematics(self, q: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """(TCP Jacobian, TCP pose) at ``q``; the last plan's end is remembered, since a sim's next
        step (and a streamed next chunk) usually starts from exactly there."""
        cache = getattr(self, "_cache", None)
        if cache is not None and cache[0].shape == q.shape and np.array_equal(cache[0], q):
            return cache[1]
        return self._kin(q)

    def _kin(self, q: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """The kinematics a row needs at ``q``: joint rows check the TCP against the box only (no
        Jacobian: it would double the cost of a row); ee rows step along the Jacobian."""
        if self.mode == "joint_delta":
            return None, model.forward_kinematics(q, self.tcp_offset)
        return model.jacobian(q, self.tcp_offset)

    def _joint_rows_in_box(self, q: np.ndarray, d: np.ndarray):
        """Every joint row at once - each scaled to the tick's step, then clamped to the joint
        limits in turn, one batched forward kinematics over all targets - when every target's TCP
        is inside the box: then the row-by-row rule below would change nothing more, and this is
        its result at a tenth of the cost. None when some target leaves the box (the row-by-row
        rule pulls it back, and the rows after it start from there)."""
        n, horizon, _ = d.shape
        d, scaled = self._scaled_to_a_tick(d)
        targets = np.empty((n, horizon, 7))
        clamped = np.zeros((n, horizon), bool)
        for h in range(horizon):
            raw = q + d[:, h]
            q = np.clip(raw, self.q_lo, self.q_hi)
            clamped[:, h] = np.any(q != raw, axis=1)
            targets[:, h] = q
        t = model.forward_kinematics(targets.reshape(n * horizon, 7), self.tcp_offset)
        if not self._in_box(t[:, :3, 3]).all():
            return None
        return targets, scaled, clamped, (None, t.reshape(n, horizon, 4, 4)[:, -1])

    # ------------------------------------------------------------------ rows
    # Each row takes (q, kinematics at q, row) and returns (target, kinematics at it, scaled, clamped).
    def _scaled_to_a_tick(self, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint rows [..., 7] scaled down as a whole to the per-tick joint step, and which were."""
        ratio = np.max(np.abs(d) / self.joint_step, axis=-1)
        return d / np.maximum(ratio, 1.0)[..., None], ratio > 1.0 + 1e-9

    def _joint_row(self, q: np.ndarray, kin, d: np.ndarray):
        d, scaled = self._scaled_to_a_tick(d)
        target, kin, clamped = self._finish(q, kin, q + d)
        return target, kin, scaled, clamped

    def _ee_row(self, q: np.ndarray, kin, d: np.ndarray):
        dp, dr = d[:, :3].copy(), d[:, 3:6].copy()
        scaled = np.zeros(len(q), bool)
        for part, cap in ((dp, self.ee_step), (dr, self.rot_step)):
            norm = np.linalg.norm(part, axis=1)
            over = norm > cap * (1.0 + 1e-9)
            part[over] *= (cap / norm[over])[:, None]
            scaled |= over
        jac, t = kin
        p = t[:, :3, 3]
        goal = p + dp
        outside = np.any((goal < self.box_lo) | (goal > self.box_hi), axis=1)
        if outside.any():  # slide along the box; from outside it only moves back in
            inside_now = np.all((p >= self.box_lo) & (p <= self.box_hi), axis=1)
            clipped = np.clip(goal, self.box_lo, self.box_hi)
            worse = self._violation(goal) >= self._violation(p)
            keep_out = ~inside_now & worse
            goal = np.where(inside_now[:, None], clipped, np.where(keep_out[:, None], p, goal))
            dp = goal - p
            dr[keep_out] = 0.0
        goal_t = t.copy()
        goal_t[:, :3, 3] = p + dp
        goal_t[:, :3, :3] = rotvec_to_matrix(dr) @ t[:, :3, :3]
        q_new = q + model.dls_step(jac, np.concatenate([dp, dr], axis=1), _IK_DAMPING)
        new_kin: tuple[np.ndarray, np.ndarray] | None  # None once dq is scaled: not its kinematics then
        new_kin = model.jacobian(q_new, self.tcp_offset)
        for _ in range(_NEWTON_STEPS):  # the row's pose exactly, not to first order only
            err = model.pose_error(goal_t, new_kin[1])
            if np.max(np.abs(err)) < _POSE_TOL:
                break
            q_new = q_new + model.dls_step(new_kin[0], err, _IK_DAMPING)
            new_kin = model.jacobian(q_new, self.tcp_offset)
        dq = q_new - q
        ratio = np.max(np.abs(dq) / self.ee_joint_step, axis=1)
        over = ratio > 1.0 + 1e-9
        scaled |= over
        if over.any():
            dq = dq / np.maximum(ratio, 1.0)[:, None]
            new_kin = None
        target, kin, clamped = self._finish(q, kin, q + dq, new_kin)
        return target, kin, scaled, clamped | outside

    def _finish(self, q: np.ndarray, kin, target: np.ndarray, target_kin=None):
        """Joint limits, then the box on exact FK; returns (target, its kinematics, clamped).
        ``target_kin``: the kinematics at ``target`` when the caller has them already."""
        limited = np.clip(target, self.q_lo, self.q_hi)
        clamped = np.any(limited != target, axis=1)
        new_kin = target_kin if target_kin is not None and not clamped.any() else self._kin(limited)
        boxed = self._keep_in_box(q, kin[1][:, :3, 3], limited, new_kin[1][:, :3, 3])
        moved = np.any(boxed != limited, axis=1)
        if moved.any():
            clamped |= moved
            new_kin = self._kin(boxed)
        return boxed, new_kin, clamped

    # ------------------------------------------------------------------ the box
    def _violation(self, p: np.ndarray) -> np.ndarray:
        return np.linalg.norm(np.maximum(self.box_lo - p, 0.0) + np.maximum(p - self.box_hi, 0.0), axis=-1)

    def _in_box(self, p: np.ndarray) -> np.ndarray:
        return np.all((p >= self.box_lo) & (p <= self.box_hi), axis=-1)

    def _keep_in_box(
        self, q: np.ndarray, start: np.ndarray, target: np.ndarray, end: np.ndarray
    ) -> np.ndarray:
        """Largest fraction of each move q -> target whose TCP stays in the box (``start``/``end``:
        the TCP at q and at target); a TCP already outside may only move to where it violates the
        box less."""
        bad = ~self._in_box(end)
        if not bad.any():
            return target
        out = target.copy()
        idx = np.flatnonzero(bad)
        was_in = self._in_box(start[idx])
        outside_rows = idx[~was_in]
        if len(outside_rows):
            better = self._violation(end[outside_rows]) < self._violation(start[outside_rows])
            out[outside_rows] = np.where(better[:, None], target[outside_rows], q[outside_rows])
        rows = idx[was_in]
        if len(rows):
            lo, hi = np.zeros(len(rows)), np.ones(len(rows))
            move = target[rows] - q[rows]
            for _ in range(_BISECTION_STEPS):
                mid = 0.5 * (lo + hi)
                ok = self._in_box(model.tcp_position(q[rows] + mid[:, None] * move, self.tcp_offset))
                lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
            out[rows] = q[rows] + lo[:, None] * move
        return out
