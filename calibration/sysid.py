"""System identification: fit the MuJoCo FR3's joint dynamics to trajectories recorded on the arm.

    x* = argmin_x  sum_segments sum_states || q_sim(x; q_seg0, dq_seg0, commands) - q_real ||^2

``x`` = per-joint damping, frictionloss, armature (7 each) and one payload mass at the hand. Each
segment of a recording (see ``calibration.alignment``) is replayed open loop from its measured
start state with the commands the arm reported (``calibration.replay``), and the difference to
the measured joint positions is the residual.

Two stages. A linear regression on the equations of motion (``calibration.regression``) lands
next to the answer in about a second; ``scipy.optimize.least_squares`` (trust-region
reflective, bounded) then refines it on the simulation error above - the quantity that matters
for a simulator, and robust to what the regression assumes (exact accelerations, sliding
friction). Starting the optimiser from the nominal model instead works but needs ~10x more
replays.

Uncertainty: the Gauss-Newton covariance ``s^2 (J^T J)^-1`` at the optimum, inflated by the
residuals' integrated autocorrelation time (consecutive 1 kHz residuals are not independent),
plus - added in quadrature - how far the optimiser moved a parameter from the regression's
value (two estimators that disagree mean the data do not pin it down: armature, typically), and
the spread of refits on halves of the segments (the replay never matches the arm exactly, and
how that mismatch biases a parameter depends on the motions recorded; a statistical std alone
misses it).
Parameters the data cannot see thus come out with a large std rather than a confident wrong
number; the std is what ``sim/randomization.py`` widens domain randomization with.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from calibration.alignment import estimate_steps, plan_segments, segment_commands, segment_targets
from calibration.fr3_dynamics import PARAM_KEYS, PARAM_WIDTH, DynamicsParams, nominal_params
from calibration.replay import Recording, ServoReplay

log = logging.getLogger(__name__)

#: Typical magnitude of each parameter group (optimiser scaling and finite-difference steps).
PARAM_SCALE = {"joint_damping": 5.0, "joint_frictionloss": 0.5, "joint_armature": 0.05, "payload_mass": 0.5}
#: Lower bounds: armature keeps the explicit servo stable; the rest may go to ~0.
PARAM_LOWER = {"joint_damping": 0.0, "joint_frictionloss": 0.0, "joint_armature": 0.02, "payload_mass": 0.0}
#: Finite-difference step as a fraction of PARAM_SCALE.
FD_STEP = 0.2
PARAM_UPPER = {
    "joint_damping": 200.0,
    "joint_frictionloss": 20.0,
    "joint_armature": 2.0,
    "payload_mass": 10.0,
}


@dataclass
class _Piece:
    q0: np.ndarray
    dq0: np.ndarray
    commands: np.ndarray
    rows: np.ndarray
    q_real: np.ndarray


@dataclass
class SysIdResult:
    """A fit: parameters with their standard deviations, and the residual it reached."""

    params: DynamicsParams
    std: dict[str, np.ndarray]
    nominal: DynamicsParams
    residual_before: float
    residual_after: float
    joint_rms_before: np.ndarray
    joint_rms_after: np.ndarray
    n_states: int
    n_segments: int
    data_hash: str
    nfev: int
    seconds: float
    fitted_keys: tuple[str, ...]
    extra: dict = field(default_factory=dict)

    @property
    def improvement(self) -> float:
        return self.residual_before / max(self.residual_after, 1e-12)

    def to_dynamics_fit(self, fit_id: str = ""):
        """The record ``sim/randomization.py`` turns into domain-randomization ranges."""
        from sim.randomization import DynamicsFit

        keys = self.fitted_keys
        return DynamicsFit(
            mean={k: getattr(self.params, k) for k in keys},
            std={k: self.std[k] for k in keys},
            fit_id=fit_id,
            residual_rms=self.residual_after,
        )

    def summary(self) -> dict:
        return {
            "params": self.params.to_dict(),
            "std": {k: np.asarray(v).tolist() for k, v in self.std.items()},
            "nominal": self.nominal.to_dict(),
            "fitted_keys": list(self.fitted_keys),
            "residual_rms_before": self.residual_before,
            "residual_rms_after": self.residual_after,
            "joint_rms_before": self.joint_rms_before.tolist(),
            "joint_rms_after": self.joint_rms_after.tolist(),
            "improvement": self.improvement,
            "n_states": self.n_states,
            "n_segments": self.n_segments,
            "nfev": self.nfev,
            "seconds": self.seconds,
            **self.extra,
        }


class SysIdProblem:
    """Recordings cut into segments, with their commands, ready to be replayed under any params."""

    def __init__(self, recordings: Sequence[Recording], replay: ServoReplay, max_states: int = 1000):
        if not recordings:
            raise ValueError("system identification needs at least one recording")
        self.recordings = list(recordings)
        self.replay = replay
        self.pieces: list[_Piece] = []
        for r, rec in enumerate(self.recordings):
            timeline = estimate_steps(rec.q, rec.dq)
            for seg in plan_segments(timeline, recording=r, max_states=max_states):
                rows, states = segment_targets(timeline, seg)
                self.pieces.append(
                    _Piece(
                        rec.q[seg.start],
                        rec.dq[seg.start],
                        segment_commands(rec, timeline, seg),
                        rows,
                        rec.q[states],
                    )
                )
        if not self.pieces:
            raise ValueError(
                "no usable segment in the recordings (arm never moved, or every interval was a stall)"
            )
        self.n_states = sum(len(p.rows) for p in self.pieces)

    def subset(self, indices: Sequence[int]) -> SysIdProblem:
        """The same problem on segments ``indices`` only (sharing the replay)."""
        sub = object.__new__(SysIdProblem)
        sub.recordings, sub.replay = self.recordings, self.replay
        sub.pieces = [self.pieces[i] for i in indices]
        sub.n_states = sum(len(p.rows) for p in sub.pieces)
        return sub

    def data_hash(self) -> str:
        import hashlib

        return hashlib.sha256("".join(r.data_hash() for r in self.recordings).encode()).hexdigest()[:16]

    def residuals(self, params: DynamicsParams | None = None) -> np.ndarray:
        """(n_states, 7) sim minus measured joint positions, all segments stacked.

        ``params`` None: replay with the model as it stands (e.g. a training env's model).
        """
        if params is not None:
            self.replay.set_params(params)
        out = []
        for p in self.pieces:
            q_sim = self.replay.run(p.q0, p.dq0, p.commands)
            out.append(q_sim[p.rows] - p.q_real)
        return np.concatenate(out)

    def simulate_piece(self, i: int, params: DynamicsParams | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(simulated, measured) joint positions of segment ``i`` (for plots)."""
        p = self.pieces[i]
        if params is not None:
            self.replay.set_params(params)
        return self.replay.run(p.q0, p.dq0, p.commands)[p.rows], p.q_real


def prediction_error(recordings: Sequence[Recording], replay: ServoReplay) -> tuple[float, np.ndarray]:
    """How well ``replay``'s model predicts the recorded arm: RMS and per-joint RMS (rad).

    Every segment is run open loop from its measured start with the recorded commands - the
    same fixed command sequence the arm executed - and compared with what the arm did.
    """
    return _rms(SysIdProblem(recordings, replay).residuals())


def _rms(r: np.ndarray) -> tuple[float, np.ndarray]:
    return float(np.sqrt(np.mean(r**2))), np.sqrt(np.mean(r**2, axis=0))


def _autocorr_time(r: np.ndarray, max_lag: int = 200) -> float:
    """Integrated autocorrelation time of the residual series (samples), averaged over joints."""
    taus = []
    for col in r.T:
        x = col - col.mean()
        var = float(x @ x)
        if var <= 0:
            continue
        tau = 1.0
        for lag in range(1, min(max_lag, len(x) // 4)):
            rho = float(x[:-lag] @ x[lag:]) / var
            if rho <= 0.05:
                break
            tau += 2 * rho
        taus.append(tau)
    return float(np.mean(taus)) if taus else 1.0


def fit_dynamics(
    recordings: Sequence[Recording],
    build_dir: Path,
    fit_keys: Sequence[str] = PARAM_KEYS,
    initial: DynamicsParams | None = None,
    max_nfev: int = 2,
    splits: int = 3,
    progress: Callable[[str], None] | None = None,
) -> SysIdResult:
    """Fit ``fit_keys`` of the FR3 dynamics to ``recordings``; the others stay nominal.

    ``initial`` skips the regression stage and starts the optimiser there. ``splits``: how many
    ways to cut the segments in two halves for the std's split-half term (0: leave it out).
    """
    unknown = sorted(set(fit_keys) - set(PARAM_KEYS))
    if unknown:
        raise ValueError(f"unknown parameter group(s) {unknown}; known: {list(PARAM_KEYS)}")
    say = progress or (lambda msg: log.info("%s", msg))
    t0 = time.perf_counter()
    nominal = nominal_params()
    problem = SysIdProblem(recordings, ServoReplay(Path(build_dir), nominal))
    say(
        f"sysid: {len(problem.pieces)} segments, {problem.n_states} states from {len(recordings)} recording(s)"
    )
    keys = tuple(k for k in PARAM_KEYS if k in fit_keys)
    before, joint_before = _rms(problem.residuals(nominal))
    say(f"sysid: residual of the nominal model {before * 1e3:.3f} mrad RMS")
    if initial is None:
        from calibration.regression import regression_estimate

        guess = regression_estimate(recordings, problem.replay)
        initial = nominal.replace(**{k: getattr(guess, k) for k in keys})
        say(f"sysid: regression estimate -> {_rms(problem.residuals(initial))[0] * 1e3:.3f} mrad RMS")
    space = _ParamSpace(keys, initial)
    x0 = space.clip(space.vector(initial))
    calls = [0]
    sol = _refine(problem, space, x0, max_nfev, calls, say)
    fitted = space.params(sol.x)
    r1 = sol.fun.reshape(-1, 7)
    after, joint_after = _rms(r1)
    say(
        f"sysid: residual after fit {after * 1e3:.3f} mrad RMS ({before / max(after, 1e-12):.1f}x), {calls[0]} replays"
    )
    # Three parts, added in quadrature: the statistical one (Gauss-Newton); the disagreement
    # between the two estimators (where the regression and the simulation-error optimum differ,
    # the data do not pin the parameter down); and the spread between fits on halves of the
    # segments (what the replay's mismatch with the arm does to the answer depends on which
    # motions were recorded - measured against franka-sim with known truth, the first two alone
    # left single parameters up to 3.4 std off).
    spread = _split_spread(problem, space, sol.x, splits, max_nfev, calls, say)
    std_vec = np.sqrt(_std(sol.jac, sol.fun, r1) ** 2 + (sol.x - x0) ** 2 + spread**2)
    return SysIdResult(
        params=fitted,
        std=space.split(std_vec),
        nominal=nominal,
        residual_before=before,
        residual_after=after,
        joint_rms_before=joint_before,
        joint_rms_after=joint_after,
        n_states=problem.n_states,
        n_segments=len(problem.pieces),
        data_hash=problem.data_hash(),
        nfev=calls[0],
        seconds=time.perf_counter() - t0,
        fitted_keys=keys,
        extra={"optimizer_status": int(sol.status), "optimizer_message": str(sol.message)},
    )


class _ParamSpace:
    """The fitted groups as one bounded, scaled vector; the groups left out keep ``base``'s values."""

    def __init__(self, keys: tuple[str, ...], base: DynamicsParams):
        self.keys, self.base = keys, base
        self.scale = np.concatenate([np.full(PARAM_WIDTH[k], PARAM_SCALE[k]) for k in keys])
        self.lower = np.concatenate([np.full(PARAM_WIDTH[k], PARAM_LOWER[k]) for k in keys])
        self.upper = np.concatenate([np.full(PARAM_WIDTH[k], PARAM_UPPER[k]) for k in keys])

    def vector(self, params: DynamicsParams) -> np.ndarray:
        return np.concatenate([getattr(params, k) for k in self.keys])

    def clip(self, x: np.ndarray) -> np.ndarray:
        return np.clip(x, self.lower + 1e-9, self.upper - 1e-9)

    def split(self, x: np.ndarray) -> dict[str, np.ndarray]:
        out, i = {}, 0
        for k in self.keys:
            out[k] = x[i : i + PARAM_WIDTH[k]]
            i += PARAM_WIDTH[k]
        return out

    def params(self, x: np.ndarray) -> DynamicsParams:
        return self.base.replace(**self.split(x))


def _refine(problem: SysIdProblem, space: _ParamSpace, x0: np.ndarray, max_nfev: int, calls: list[int], say):
    """``least_squares`` on the simulation error of ``problem``'s segments, from ``x0``."""
    from scipy.optimize import least_squares

    def fun(x: np.ndarray) -> np.ndarray:
        calls[0] += 1
        return problem.residuals(space.params(x)).ravel()

    # Forward differences with steps a fifth of each parameter's typical size, pointing away
    # from the nearer bound. Tiny steps would differentiate noise: the explicit wrist servo
    # chatters, so a 1e-4 change moves the trajectory by ~1e-4 rad whatever its sign.
    steps = FD_STEP * space.scale
    cache: dict[bytes, np.ndarray] = {}

    def jac(x: np.ndarray) -> np.ndarray:
        f0 = cache.get(x.tobytes())
        if f0 is None:
            f0 = fun(x)
        cols = []
        for i in range(len(x)):
            h = steps[i] if x[i] + steps[i] <= space.upper[i] else -steps[i]
            xi = x.copy()
            xi[i] += h
            cols.append((fun(xi) - f0) / h)
        say(
            f"sysid: jacobian at residual {np.sqrt(np.mean(f0**2)) * 1e3:.3f} mrad ({calls[0]} replays so far)"
        )
        return np.stack(cols, axis=1)

    def fun_cached(x: np.ndarray) -> np.ndarray:
        f = fun(x)
        cache.clear()
        cache[x.tobytes()] = f
        return f

    return least_squares(
        fun_cached, x0, jac=jac, bounds=(space.lower, space.upper), x_scale=space.scale, max_nfev=max_nfev
    )


def _split_spread(
    problem: SysIdProblem,
    space: _ParamSpace,
    x: np.ndarray,
    splits: int,
    max_nfev: int,
    calls: list[int],
    say,
) -> np.ndarray:
    """Split-half std of the full fit: refit on two halves of the segments, from the full fit.

    For halves of n_a and n_b states, var(x_a - x_b) ~ var(x) (N/n_a + N/n_b); the estimate is
    averaged over up to ``splits`` different halvings (every halving keeps segment 0 in the first
    half). Zero when there are fewer than two segments.
    """
    n = len(problem.pieces)
    if splits <= 0 or n < 2:
        return np.zeros_like(x)
    picked = _halvings(n, splits)
    sizes = np.array([len(p.rows) for p in problem.pieces], dtype=float)
    var = np.zeros_like(x)
    for first in picked:
        second = tuple(i for i in range(n) if i not in first)
        a, b = (
            _refine(problem.subset(h), space, x, max_nfev, calls, lambda _m: None).x for h in (first, second)
        )
        n_a, n_b = sizes[list(first)].sum(), sizes[list(second)].sum()
        var += (a - b) ** 2 / ((n_a + n_b) / n_a + (n_a + n_b) / n_b)
    say(f"sysid: split-half spread from {len(picked)} halving(s) of {n} segments ({calls[0]} replays so far)")
    return np.sqrt(var / len(picked))


#: Up to this many halvings are enumerated and ``splits`` of them taken evenly spaced; beyond it they
#: are drawn. The count is C(n-1, n/2-1): a recording a stalling arm cut into 40 segments has 7e10,
#: and listing them ran a busy machine out of memory.
MAX_ENUMERATED_HALVINGS = 10_000


def _halvings(n: int, splits: int) -> list[tuple[int, ...]]:
    """``splits`` distinct first halves of segments ``0..n-1`` (each holding segment 0 and n//2 - 1
    others), the same for the same ``n`` every time."""
    from itertools import combinations
    from math import comb

    total = comb(n - 1, n // 2 - 1)
    if total <= MAX_ENUMERATED_HALVINGS:
        halves = list(combinations(range(1, n), n // 2 - 1))
        chosen = np.unique(np.linspace(0, total - 1, min(splits, total)).round()).astype(int)
        return [(0, *halves[i]) for i in chosen]
    rng = np.random.default_rng(n)
    out: list[tuple[int, ...]] = []
    while len(out) < splits:
        half = (0, *sorted(int(i) for i in rng.choice(np.arange(1, n), n // 2 - 1, replace=False)))
        if half not in out:
            out.append(half)
    return out


def _std(jac: np.ndarray, fun: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Gauss-Newton standard deviations, inflated for autocorrelated residuals."""
    n, p = jac.shape
    dof = max(n - p, 1)
    s2 = float(fun @ fun) / dof
    jtj = jac.T @ jac
    cov = np.linalg.pinv(jtj, rcond=1e-12) * s2 * _autocorr_time(r)
    return np.sqrt(np.clip(np.diag(cov), 0.0, None))
