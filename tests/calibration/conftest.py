"""Calibration tests: rendered ground truth (OSMesa) and a deliberately different FR3 in franka-sim."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("MESA_SHADER_CACHE_DIR", tempfile.mkdtemp(prefix="mesa-cache-"))


@pytest.fixture(scope="session")
def real_arm(tmp_path_factory):
    """Two excitation recordings from franka-sim serving the reality-gap FR3 (damping 30 via
    ``FR3_JOINT_DAMPING``; friction, armature and a 1.5 kg payload via the MJCF): one to fit on,
    one held out. Returns (true params, fit recording, held-out recording)."""
    from calibration.excitation import ExcitationConfig, plan_excitation, record_excitation
    from calibration.fr3_dynamics import reality_gap_params, write_variant_mjcf
    from rlinf_robot.robot.franka.sim_server import FrankaSimServer

    truth = reality_gap_params()
    mjcf = write_variant_mjcf(truth, tmp_path_factory.mktemp("real-arm") / "fr3_real.xml")
    fit_plan = plan_excitation(ExcitationConfig(duration_s=4.0, seed=0))
    held_out = plan_excitation(ExcitationConfig(duration_s=3.0, seed=7, harmonics=(1, 2, 3), velocity_fraction=0.7))
    damping = ",".join(str(float(d)) for d in truth.joint_damping)
    with FrankaSimServer(gripper=False, mjcf=mjcf, env={"FR3_JOINT_DAMPING": damping}) as server:
        fit_rec = record_excitation(fit_plan, server.host)
        held_rec = record_excitation(held_out, server.host)
    return truth, fit_rec, held_rec


@pytest.fixture(scope="session")
def sysid_fit(real_arm, tmp_path_factory):
    """The fit on the first recording (shared by the sysid tests)."""
    from calibration.sysid import fit_dynamics

    truth, rec, _ = real_arm
    return fit_dynamics([rec], tmp_path_factory.mktemp("sysid-model"))


def assert_within(value, truth, rel, what):
    value, truth = np.asarray(value), np.asarray(truth)
    err = np.abs(value - truth) / np.abs(truth)
    assert np.all(err <= rel), f"{what}: {np.round(value, 3).tolist()} vs true {np.round(truth, 3).tolist()}"
