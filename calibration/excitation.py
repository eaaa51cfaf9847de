"""Excitation trajectories for system identification, and recording them on the arm through franky.

The plan is a sum of sines per joint around a start pose,

    p_j(t) = w(t) * sum_k a_jk sin(2 pi k t / T + phi_jk),   w(t) = sin^2(pi t / T),

so it starts and ends at rest at the start pose; incommensurate phases per joint decorrelate the
joints, several harmonics separate velocity (damping, friction) from acceleration (armature,
payload). It is executed as joint-velocity waypoints (``v = dp/dt``; why velocity, see
``calibration.replay``). Before anything moves the whole planned path is checked against the
safety limits - joint range with margin, the velocity budget, the TCP inside the workspace box
shrunk by ``box_margin`` - with the excursion scaled up by ``excursion_factor``: velocity commands
are integrated by the arm, so the executed path drifts from the plan (a more damped arm falls
short - the drift is what is being measured - and franka-sim on a loaded host overshoots). A plan
that fails raises ``SafetyViolation`` and nothing moves.
While the arm moves, a guard watches every recorded state and stops the motion if a joint nears
its limit or the TCP leaves the box.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from calibration.replay import Recording
from rlinf_robot.errors import ConfigError, SafetyViolation
from rlinf_robot.robot.franka.model import tcp_position
from rlinf_robot.safety import SafetyLimits

if TYPE_CHECKING:
    from rlinf_robot.robot.franka.link import FrankyLink

log = logging.getLogger(__name__)

#: A start pose well inside every limit, elbow up, hand over the middle of the workspace box
#: (TCP ~[0.53, 0, 0.40]).
DEFAULT_START = np.array([0.0, -0.1, 0.0, -2.0, 0.0, 1.9, 0.785])
#: Per-joint amplitude (rad) before velocity scaling: the wrist gets more, it is lighter.
DEFAULT_AMPLITUDE = np.array([0.25, 0.2, 0.25, 0.25, 0.35, 0.35, 0.4])


@dataclass(frozen=True)
class ExcitationConfig:
    duration_s: float = 4.0
    harmonics: tuple[int, ...] = (1, 2, 3, 4, 5)
    amplitude: tuple[float, ...] = tuple(DEFAULT_AMPLITUDE)
    #: Fraction of the safety velocity budget (``joint_velocity_max * velocity_scale``) to use.
    velocity_fraction: float = 0.9
    waypoint_dt: float = 0.05
    seed: int = 0
    start: tuple[float, ...] = tuple(DEFAULT_START)
    #: The planned TCP path keeps this far (m) inside the workspace box ...
    box_margin: float = 0.03
    #: ... even with every joint's excursion from the start scaled by this factor. Velocity
    #: commands are integrated by the arm: a slower arm falls short, and a simulator whose physics
    #: clock outruns the controller's (franka-sim on a loaded host) overshoots: 1.9x was recorded
    #: with three CPU-bound processes on 2 cores (a clean-clone test run beside a training job).
    #: Every default plan (2-20 s, seeds 0-3) passes at 2.5.
    excursion_factor: float = 2.5

    def __post_init__(self):
        if not 1.0 <= self.duration_s <= 120.0:
            raise ConfigError(f"excitation.duration_s must be in [1, 120], got {self.duration_s}")
        if not self.harmonics or any(int(h) < 1 or int(h) > 20 for h in self.harmonics):
            raise ConfigError(f"excitation.harmonics must be integers in [1, 20], got {self.harmonics}")
        if len(self.amplitude) != 7 or any(not 0 <= a <= 1.0 for a in self.amplitude):
            raise ConfigError(f"excitation.amplitude needs 7 values in [0, 1] rad, got {self.amplitude}")
        if not 0 < self.velocity_fraction <= 1:
            raise ConfigError(f"excitation.velocity_fraction must be in (0, 1], got {self.velocity_fraction}")
        if not 0.01 <= self.waypoint_dt <= 0.5:
            raise ConfigError(f"excitation.waypoint_dt must be in [0.01, 0.5] s, got {self.waypoint_dt}")
        if len(self.start) != 7 or not np.all(np.isfinite(self.start)):
            raise ConfigError(f"excitation.start needs 7 finite joint angles, got {self.start}")
        if not 0 <= self.box_margin <= 0.2:
            raise ConfigError(f"excitation.box_margin must be in [0, 0.2] m, got {self.box_margin}")
        if not 1.0 <= self.excursion_factor <= 3.0:
            raise ConfigError(f"excitation.excursion_factor must be in [1, 3], got {self.excursion_factor}")


@dataclass(frozen=True)
class ExcitationPlan:
    """Dense planned path (1 kHz) and the velocity waypoints the arm is given."""

    start: np.ndarray
    t: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    waypoint_t: np.ndarray
    waypoint_velocity: np.ndarray
    waypoint_dt: float

    @property
    def peak_velocity(self) -> np.ndarray:
        return np.abs(self.velocity).max(axis=0)


def plan_excitation(
    cfg: ExcitationConfig = ExcitationConfig(), limits: SafetyLimits | None = None
) -> ExcitationPlan:
    """Build and check a plan; raises ``SafetyViolation`` when it would leave the safety limits."""
    limits = limits or SafetyLimits.from_yaml()
    rng = np.random.default_rng(cfg.seed)
    T = cfg.duration_s
    t = np.arange(int(round(T * 1000)) + 1) * 1e-3
    h = np.asarray(cfg.harmonics, dtype=np.float64)
    w = np.sin(np.pi * t / T) ** 2
    dw = np.pi / T * np.sin(2 * np.pi * t / T)
    pos = np.zeros((len(t), 7))
    vel = np.zeros((len(t), 7))
    for j in range(7):
        weights = rng.uniform(0.5, 1.0, len(h)) / h  # 1/k roll-off keeps accelerations moderate
        weights *= cfg.amplitude[j] / max(weights.sum(), 1e-12)
        phase = rng.uniform(0, 2 * np.pi, len(h))
        arg = 2 * np.pi * np.outer(t, h) / T + phase
        s = np.sin(arg) @ weights
        ds = (np.cos(arg) * (2 * np.pi * h / T)) @ weights
        pos[:, j] = w * s
        vel[:, j] = dw * s + w * ds
    budget = cfg.velocity_fraction * limits.joint_velocity_max * limits.velocity_scale
    scale = np.minimum(1.0, budget / np.maximum(np.abs(vel).max(axis=0), 1e-12))
    pos *= scale
    vel *= scale
    start = np.asarray(cfg.start, dtype=np.float64)
    path = start + pos
    _check(start + cfg.excursion_factor * pos, vel, limits, cfg.box_margin)
    stride = int(round(cfg.waypoint_dt * 1000))
    idx = np.arange(stride, len(t), stride)
    wv = vel[idx].copy()
    wv[-1] = 0.0
    return ExcitationPlan(start, t, path, vel, t[idx], wv, cfg.waypoint_dt)


def _check(path: np.ndarray, vel: np.ndarray, limits: SafetyLimits, box_margin: float) -> None:
    lo, hi = limits.q_lo, limits.q_hi
    if np.any(path < lo) or np.any(path > hi):
        j = int(np.argmax(np.maximum(lo - path, path - hi).max(axis=0)))
        raise SafetyViolation(
            f"excitation leaves joint {j + 1}'s range [{lo[j]:.3f}, {hi[j]:.3f}] "
            f"(planned {path[:, j].min():.3f}..{path[:, j].max():.3f}); reduce amplitude or move the start"
        )
    vmax = limits.joint_velocity_max * limits.velocity_scale
    if np.any(np.abs(vel) > vmax + 1e-9):
        raise SafetyViolation("excitation exceeds the joint velocity budget")
    lo, hi = limits.workspace_min + box_margin, limits.workspace_max - box_margin
    tcp = tcp_position(path[::10], limits.tcp_offset)
    outside = np.any((tcp < lo) | (tcp > hi), axis=1)
    if np.any(outside):
        k = int(np.argmax(outside))
        raise SafetyViolation(
            f"excitation takes the TCP to {np.round(tcp[k], 3).tolist()}, outside the workspace box "
            f"{lo.round(3).tolist()}..{hi.round(3).tolist()} (the safety box less a {box_margin} m margin)"
        )


class MotionGuard:
    """Judges recorded states while the arm moves: joints inside the datasheet range less half the
    safety margin, TCP inside the workspace box. Returns a reason to stop, or None."""

    def __init__(self, limits: SafetyLimits):
        self.limits = limits
        half = limits.joint_position_margin / 2
        self.q_lo = limits.joint_position_min + half
        self.q_hi = limits.joint_position_max - half

    def check(self, q: np.ndarray) -> str | None:
        if np.any(q < self.q_lo) or np.any(q > self.q_hi):
            j = int(np.argmax(np.maximum(self.q_lo - q, q - self.q_hi)))
            return f"joint {j + 1} at {q[j]:.3f} rad, outside [{self.q_lo[j]:.3f}, {self.q_hi[j]:.3f}]"
        tcp = tcp_position(q, self.limits.tcp_offset)
        if np.any(tcp < self.limits.workspace_min) or np.any(tcp > self.limits.workspace_max):
            return f"TCP at {np.round(tcp, 3).tolist()} left the workspace box"
        return None


def record_excitation(
    plan: ExcitationPlan,
    host: str = "127.0.0.1",
    move_dynamics_factor: float = 0.2,
    link: FrankyLink | None = None,
    limits: SafetyLimits | None = None,
) -> Recording:
    """Move to the plan's start, run it as joint-velocity waypoints, record every cycle.

    The recording keeps, per 1 kHz controller cycle, the measured ``q``/``dq`` and the velocity
    command the arm reports holding (``dq_d``). ``link`` may be an already connected
    ``FrankyLink`` (left open); otherwise one is connected to ``host`` (and closed). A ``MotionGuard`` checks the states
    as they arrive and stops the arm (``SafetyViolation``) if one leaves the limits.
    """
    from rlinf_robot.robot.franka.link import FrankyLink

    own = link is None
    if link is None:
        link = FrankyLink(host)
        link.connect()
    guard = MotionGuard(limits or SafetyLimits.from_yaml())
    t0 = time.perf_counter()
    rows, stop_reason = link.run_velocity_profile(
        plan.start,
        plan.waypoint_velocity,
        plan.waypoint_dt,
        guard.check,
        move_dynamics_factor=move_dynamics_factor,
        timeout_s=10.0,
    )
    if own:
        link.close()
    if stop_reason is not None:
        raise SafetyViolation(f"excitation stopped: {stop_reason}")
    log.info("excitation: %d cycles in %.2f s", len(rows), time.perf_counter() - t0)
    if len(rows) < 10:
        raise RuntimeError(f"excitation recorded only {len(rows)} cycles")
    t = np.array([r[0] for r in rows])
    return Recording(
        t=t - t[0],
        q=np.array([r[1] for r in rows]),
        dq=np.array([r[2] for r in rows]),
        dq_cmd=np.array([r[3] for r in rows]),
    )
