"""Calibration tests: rendered ground truth (OSMesa) and a deliberately different FR3 in franka-sim."""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("MESA_SHADER_CACHE_DIR", tempfile.mkdtemp(prefix="mesa-cache-"))


def _record_stopped_safely(plan, host, tries: int = 3):
    """A recording the guard lets through, retried when the guard stopped one.

    On a loaded host the client misses control cycles and franka-sim, extrapolating them as the FCI
    does, overshoots the planned path: in a clean-clone run beside a training job the held-out plan
    (inside the box at 3x its excursion) reached the box's x bound. The guard stopping it is the
    safety property working; what these tests need is one recording that stayed inside, so a stopped
    one is printed and the plan run again from its start (the arm comes to rest by itself)."""
    from calibration.excitation import record_excitation
    from rlinf_robot.errors import SafetyViolation

    for attempt in range(1, tries):
        try:
            return record_excitation(plan, host)
        except SafetyViolation as exc:
            print(f"excitation attempt {attempt}/{tries} stopped by the guard: {exc}", flush=True)
            time.sleep(1.0)
    return record_excitation(plan, host)  # the last try's SafetyViolation fails the fixture


@pytest.fixture(scope="session")
def real_arm(tmp_path_factory):
    """Two excitation recordings from franka-sim serving the reality-gap FR3 (damping 30 via
    ``FR3_JOINT_DAMPING``; friction, armature and a 1.5 kg payload via the MJCF): one to fit on,
    one held out. Then one run with a workspace box the plan crosses halfway, which the guard
    must stop. Returns a namespace: truth, fit, held_out, guard (the SafetyViolation), and the
    arm's state once it came to rest (q_after, dq_after)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from calibration.excitation import ExcitationConfig, plan_excitation, record_excitation
    from calibration.fr3_dynamics import reality_gap_params, write_variant_mjcf
    from rlinf_robot.errors import SafetyViolation
    from rlinf_robot.robot.franka.link import FrankyLink
    from rlinf_robot.robot.franka.model import forward_kinematics
    from rlinf_robot.robot.franka.sim_server import FrankaSimServer
    from rlinf_robot.safety import SafetyLimits

    truth = reality_gap_params()
    mjcf = write_variant_mjcf(truth, tmp_path_factory.mktemp("real-arm") / "fr3_real.xml")
    fit_plan = plan_excitation(ExcitationConfig(duration_s=4.0, seed=0))
    held_out = plan_excitation(
        # a seed whose plan keeps inside the box (less its 3 cm margin) even at 4x its excursion: on
        # a loaded host the client misses cycles, franka-sim extrapolates them as the FCI does, and
        # overshoots of 3-4x were recorded beside two training jobs (seed 10, at 2.5x, left the box)
        ExcitationConfig(
            duration_s=3.0, seed=1, harmonics=(1, 2, 3), velocity_fraction=0.5, excursion_factor=3.0
        )
    )
    limits = SafetyLimits.from_yaml()
    # The box: 2 mm around the planned TCP path, but cut halfway along the path's largest excursion
    # from its start, so the plan itself crosses the cut (a 2 mm box alone was left only when the
    # damped arm drifted far enough, which depended on timing) while the start stays inside.
    tcp = forward_kinematics(fit_plan.position[::10])[:, :3, 3]
    start = tcp[0]
    box_max = tcp.max(0) + 0.002
    axis = int(np.argmax(tcp.max(0) - start))
    box_max[axis] = start[axis] + 0.5 * (tcp[:, axis].max() - start[axis])
    tight = replace(limits, workspace_min=tcp.min(0) - 0.002, workspace_max=box_max)
    damping = ",".join(str(float(d)) for d in truth.joint_damping)
    with FrankaSimServer(gripper=False, mjcf=mjcf, env={"FR3_JOINT_DAMPING": damping}) as server:
        fit_rec = _record_stopped_safely(fit_plan, server.host)
        held_rec = _record_stopped_safely(held_out, server.host)
        link = FrankyLink(server.host)
        link.connect()
        try:
            record_excitation(fit_plan, link=link, limits=tight)
            guard = None
        except SafetyViolation as exc:
            guard = exc
        deadline = time.monotonic() + 3.0  # the stopped arm must come to rest by itself
        while np.abs(link.read().dq).max() > 1e-3 and time.monotonic() < deadline:
            time.sleep(0.01)
        reading = link.read()
        q_after, dq_after = reading.q, reading.dq
        link.close()
    return SimpleNamespace(
        truth=truth, fit=fit_rec, held_out=held_rec, guard=guard, q_after=q_after, dq_after=dq_after
    )


@pytest.fixture(scope="session")
def sysid_fit(real_arm, tmp_path_factory):
    """The fit on the first recording (shared by the sysid tests)."""
    from calibration.sysid import fit_dynamics

    return fit_dynamics([real_arm.fit], tmp_path_factory.mktemp("sysid-model"))
