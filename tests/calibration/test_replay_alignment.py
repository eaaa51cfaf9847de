"""The replay mirrors franka-sim's servo exactly, and the step timeline is recovered from states."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from calibration.alignment import estimate_steps, plan_segments, segment_commands
from calibration.fr3_dynamics import nominal_params, reality_gap_params, write_variant_mjcf
from calibration.replay import Recording, ServoReplay
from rlinf_robot.paths import franka_sim_venv

START = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785])


def _commands(n: int, seed: int = 0) -> np.ndarray:
    t = np.arange(n) * 1e-3
    rng = np.random.default_rng(seed)
    amp, freq, phase = rng.uniform(0.1, 0.4, 7), rng.uniform(0.5, 2.0, 7), rng.uniform(0, 6, 7)
    return amp * np.sin(2 * np.pi * freq * t[:, None] + phase) * np.minimum(1.0, t[:, None] / 0.2)


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    return ServoReplay(tmp_path_factory.mktemp("replay"), nominal_params())


_FRANKA_SIM_STEPPER = """
import os, sys, numpy as np
os.environ["FR3_MJCF"] = sys.argv[1]
from franka_sim.control_modes import ControlMode
from franka_sim.mujoco_franka_sim import MujocoFrankaSim
import mujoco
z = np.load(sys.argv[2])
sim = MujocoFrankaSim(model_path=sys.argv[1]); sim.initialize_simulation()
sim.data.qpos[:] = 0; sim.data.qvel[:] = 0
sim.data.qpos[sim.arm_qpos_adr] = z["q0"]; mujoco.mj_forward(sim.model, sim.data)
sim.set_control_mode(ControlMode.VELOCITY)
out = []
for c in z["cmd"]:
    sim.update_joint_velocities(c); sim.step(1); out.append(np.array(sim.data.qpos[sim.arm_qpos_adr]))
np.save(sys.argv[3], np.array(out))
"""


@pytest.mark.slow
def test_replay_matches_franka_sims_own_backend(tmp_path):
    """Same model, same per-step velocity commands: franka-sim's MuJoCo backend (its venv, its
    MuJoCo 3.2) and our replay (MuJoCo 4) must agree to numerical precision."""
    python = franka_sim_venv() / "bin" / "python"
    if not python.exists():
        pytest.skip("franka-sim venv not installed (make setup)")
    params = reality_gap_params()
    mjcf = write_variant_mjcf(params, tmp_path / "fr3.xml")
    cmd = _commands(1500)
    np.savez(tmp_path / "in.npz", q0=START, cmd=cmd)
    (tmp_path / "step.py").write_text(_FRANKA_SIM_STEPPER)
    subprocess.run(
        [
            str(python),
            str(tmp_path / "step.py"),
            str(mjcf),
            str(tmp_path / "in.npz"),
            str(tmp_path / "out.npy"),
        ],
        check=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    theirs = np.load(tmp_path / "out.npy")
    ours = ServoReplay(tmp_path, params).run(START, np.zeros(7), cmd)
    assert np.abs(ours - theirs).max() < 1e-6
    nominal = ServoReplay(tmp_path / "nominal", nominal_params()).run(START, np.zeros(7), cmd)
    assert np.abs(nominal - theirs).max() > 1e-3  # the parameters do matter


def test_step_timeline_is_recovered_from_states(replay):
    """Simulate 1 kHz physics, then observe it like franka-sim's stream does on a loaded host:
    some states repeated (physics stalled), some steps never seen (two steps per state)."""
    cmd = _commands(3000, seed=1)
    q = replay.run(START, np.zeros(7), cmd)
    dq = np.vstack([np.zeros(7), np.diff(q, axis=0) / 1e-3])  # semi-implicit Euler: v_k = dq_k/dt
    rng = np.random.default_rng(3)
    true_steps = rng.choice([0, 1, 1, 1, 2, 3], size=1500)
    seen = np.cumsum(np.r_[200, true_steps])
    seen = seen[seen < len(q)]
    timeline = estimate_steps(q[seen], dq[seen])
    moving = np.abs(dq[seen][:-1]).max(axis=1) > 1e-3
    assert np.array_equal(timeline.steps[moving], np.diff(seen)[moving])


def test_segments_cut_at_stalls_and_commands_follow_the_timeline():
    steps = np.array([1, 1, 1, 9, 1, 1, 1, 1, 1, 1, 2, 1, 1])
    from calibration.alignment import StepTimeline

    tl = StepTimeline(steps=steps, fit=np.zeros(len(steps)))
    segs = plan_segments(tl, min_states=2)
    assert [(s.start, s.stop) for s in segs] == [(0, 3), (4, 13)]
    rec = Recording(
        t=np.arange(14) * 1e-3,
        q=np.zeros((14, 7)),
        dq=np.zeros((14, 7)),
        dq_cmd=np.arange(14)[:, None] * np.ones((1, 7)),
    )
    cmds = segment_commands(rec, tl, segs[1])
    # One command per physics step, each the echo of the latest state at least one step old.
    assert len(cmds) == tl.index[13] - tl.index[4]
    assert cmds[0, 0] == 3 and cmds[1, 0] == 4 and list(cmds[6:9, 0]) == [9, 10, 10]


def test_recording_validates_and_round_trips(tmp_path):
    rec = Recording(t=np.arange(5) * 1e-3, q=np.zeros((5, 7)), dq=np.ones((5, 7)), dq_cmd=np.ones((5, 7)))
    rec.save(tmp_path / "r.npz")
    back = Recording.load(tmp_path / "r.npz")
    assert back.data_hash() == rec.data_hash()
    with pytest.raises(ValueError, match="finite"):
        Recording(t=np.arange(5), q=np.full((5, 7), np.nan), dq=np.ones((5, 7)), dq_cmd=np.ones((5, 7)))
    with pytest.raises(ValueError, match="shape"):
        Recording(t=np.arange(5), q=np.zeros((5, 6)), dq=np.ones((5, 7)), dq_cmd=np.ones((5, 7)))


def test_split_half_halvings_are_drawn_not_listed_when_there_are_too_many():
    """A stalling arm cuts a recording into many segments: listing every halving of 60 (C(59, 29),
    ~6e16) ran a capped CI-like machine out of memory inside the fit. Few segments: the evenly
    spaced pick from the full list, as before; many: distinct seeded draws, the same every time."""
    from itertools import combinations

    from calibration.sysid import _halvings

    halves = [(0, *r) for r in combinations(range(1, 8), 3)]
    assert _halvings(8, 3) == [halves[0], halves[17], halves[34]]
    many = _halvings(60, 3)
    assert many == _halvings(60, 3) and len(set(many)) == 3
    assert all(h[0] == 0 and len(h) == 30 and len(set(h)) == 30 and max(h) < 60 for h in many)
