"""System identification against franka-sim serving a deliberately different FR3.

The "real" arm here is franka-sim (the MuJoCo FR3 behind the real libfranka protocol), not a
physical FR3: it serves ``calibration.fr3_dynamics.reality_gap_params()`` (damping 30 / 5 where
the model has 0.21, 1.5x dry friction, 1.3x armature, a 1.5 kg payload), so the true parameters
are known. Recorded through franky with a sum-of-sines excitation inside the safety limits,
replayed in the MuJoCo FR3, fitted; then the fit goes into the store and into ``sim.make`` as
domain randomization.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.randomization import SYSID_N_SIGMA

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_recording_stays_inside_the_safety_limits(real_arm):
    from rlinf_robot.robot.franka.model import forward_kinematics
    from rlinf_robot.safety import SafetyLimits

    limits = SafetyLimits.from_yaml()
    for r in (real_arm.fit, real_arm.held_out):
        assert len(r) > 2500  # ~1 kHz for >= 3 s
        assert np.all(r.q >= limits.joint_position_min) and np.all(r.q <= limits.joint_position_max)
        tcp = forward_kinematics(r.q[::20])[:, :3, 3]
        assert np.all(tcp >= limits.workspace_min) and np.all(tcp <= limits.workspace_max)
        assert np.abs(r.dq).max() < limits.joint_velocity_max.max() * limits.velocity_scale
        assert np.abs(r.dq_cmd).max() > 0.2  # it really moved


def test_guard_stops_an_excitation_that_leaves_the_workspace_box(real_arm):
    """A box the planned TCP path crosses halfway along its largest excursion: the guard stops
    the arm there, and it comes to rest inside the (real) workspace."""
    from rlinf_robot.robot.franka.model import forward_kinematics
    from rlinf_robot.safety import SafetyLimits

    assert real_arm.guard is not None and "left the workspace box" in str(real_arm.guard)
    assert np.abs(real_arm.dq_after).max() <= 1e-3  # stopped and at rest, not drifting on
    limits = SafetyLimits.from_yaml()
    tcp = forward_kinematics(real_arm.q_after)[:3, 3]
    assert np.all(tcp >= limits.workspace_min) and np.all(tcp <= limits.workspace_max)


#: What the fit must achieve against franka-sim (README, "System identification"). Measured on six
#: recordings of the test's plan (2-core machine, other jobs running), worst joint of each run:
#: damping 0.4-1.0 %, dry friction 1.4-4.5 % (joint 7, the least friction, is the noisiest),
#: payload 0.01-0.07 kg, armature 10-52 % off; residual 1.5-3.8 -> 0.013-0.024 mrad RMS (78-270x).
#: Five later runs went further on the wrist: damping of joint 7 2.3 % off, its friction 5.3 %, so
#: damping is held to 4 %. The std bound is the range from_sysid draws by default,
#: SYSID_N_SIGMA = 3: before the std had its split-half term, a CI run (2026-12-05) put the
#: armature of joint 4 3.4 std off; with it, 24 recordings (14 on a quiet machine, 10 with
#: franka-sim under a 1-CPU cap) put every parameter within 2.4 std, 22 of them within 1.6.
DAMPING_REL = 0.04
FRICTION_REL = 0.08
PAYLOAD_KG = 0.1
N_STD = SYSID_N_SIGMA  # every fitted parameter within this many of its reported standard deviations
#: The fit must explain the recording about as well as the true parameters do (within this factor).
#: What is left is franka-sim's timing noise, which grows on a busy machine (0.013-0.025 mrad on a
#: quiet one, 0.053 in a CI run of 2026-12-04), so the bound is relative to the same recording's
#: residual under the truth, not a constant. On a quiet machine the fit leaves about half the
#: truth's residual (0.024 vs 0.048 mrad: it also absorbs some of the replay's own mismatch).
NOISE_FLOOR_FACTOR = 1.5
IMPROVEMENT = 30.0
#: The bounds above hold on recordings as clean as a quiet machine's (the true parameters leave up
#: to this much). A least-squares estimate's error grows in proportion to the noise in its data, so
#: on a noisier recording the point bounds widen by the same factor: a CI run of 2026-12-05 left
#: 0.064 mrad under the truth and put the payload 0.14 kg off (0.87 of its reported std).
QUIET_FLOOR = 0.025e-3


def fit_errors(res, truth) -> dict[str, np.ndarray]:
    """Per parameter group: relative error, absolute error, and error in reported stds."""
    from calibration.fr3_dynamics import PARAM_KEYS

    out = {}
    for key in PARAM_KEYS:  # a group left out of the fit keeps its nominal value and no std
        err = np.abs(getattr(res.params, key) - getattr(truth, key))
        std = res.std.get(key, np.zeros_like(err))
        out[key] = (
            err / np.abs(getattr(truth, key)),
            err,
            np.divide(err, std, out=np.full_like(err, np.inf), where=std > 0),
        )
    return out


def residual_of_truth(recording, truth, build_dir) -> float:
    """RMS residual the true parameters leave on ``recording``: the noise floor no fit can beat."""
    from calibration.fr3_dynamics import nominal_params
    from calibration.replay import ServoReplay
    from calibration.sysid import SysIdProblem

    r = SysIdProblem([recording], ServoReplay(build_dir, nominal_params())).residuals(truth)
    return float(np.sqrt(np.mean(r**2)))


def assert_fit_as_documented(res, truth, floor: float) -> None:
    errors = fit_errors(res, truth)
    noise = max(1.0, floor / QUIET_FLOOR)
    shown = {k: [np.round(100 * e[0], 2).tolist(), np.round(e[2], 2).tolist()] for k, e in errors.items()}
    shown["noise_factor"] = round(noise, 2)
    assert res.residual_after <= NOISE_FLOOR_FACTOR * floor and res.improvement >= IMPROVEMENT, (
        f"residual before {res.residual_before * 1e3:.4f} mrad, after {res.residual_after * 1e3:.4f} mrad, "
        f"true parameters' {floor * 1e3:.4f} mrad"
    )
    assert np.all(errors["joint_damping"][0] <= DAMPING_REL * noise), shown
    assert np.all(errors["joint_frictionloss"][0] <= FRICTION_REL * noise), shown
    assert errors["payload_mass"][1][0] <= PAYLOAD_KG * noise, shown
    # Armature is the least visible parameter (10-50 % off): its std must say so. Every group's
    # truth lies inside mean +- N_STD std, the range DomainRandomization.from_sysid draws by default.
    for key, (_, _, in_std) in errors.items():
        assert np.all(in_std <= N_STD), (key, shown)
    for key in res.fitted_keys:
        assert np.all(np.isfinite(res.std[key])) and np.all(res.std[key] > 0)


def test_fit_shrinks_the_residual_and_finds_the_true_parameters(real_arm, sysid_fit, tmp_path):
    assert sysid_fit.fitted_keys == ("joint_damping", "joint_frictionloss", "joint_armature", "payload_mass")
    floor = residual_of_truth(real_arm.fit, real_arm.truth, tmp_path)
    print(f"residual: fit {sysid_fit.residual_after * 1e3:.4f} mrad, true parameters {floor * 1e3:.4f} mrad")
    assert_fit_as_documented(sysid_fit, real_arm.truth, floor)


def test_fit_goes_into_the_store_with_an_id_training_can_name(sysid_fit, tmp_path):
    from calibration.session import dynamics_fit_from_record, sysid_record
    from calibration.store import CalibrationStore

    store = CalibrationStore(tmp_path)
    record = sysid_record(sysid_fit, robot_serial="fr3-test")
    store.save(record)
    loaded = store.get(record.id)
    assert loaded.problems() == []
    fit = dynamics_fit_from_record(loaded)
    assert fit.fit_id == record.id
    np.testing.assert_allclose(fit.mean["joint_damping"], sysid_fit.params.joint_damping)
    np.testing.assert_allclose(fit.std["payload_mass"], sysid_fit.std["payload_mass"])
    assert store.require(("sysid",), robot_serial="fr3-test") == {"sysid": record.id}


def test_fitted_sim_env_predicts_the_arm_far_better_than_the_nominal_one(real_arm, sysid_fit):
    """A fixed controller (a held-out joint-velocity trajectory the fit never saw) run in
    ``sim.make(..., randomization=from_sysid(fit))`` vs the nominal env, against the arm."""
    import sim
    from calibration.replay import ServoReplay
    from calibration.sysid import prediction_error
    from sim.randomization import DomainRandomization

    held = real_arm.held_out
    fit = sysid_fit.to_dynamics_fit("sysid-test")
    nominal_env = sim.make("mujoco/fr3-reach", num_envs=1, seed=0)
    nominal_env.reset(seed=0)
    nominal, _ = prediction_error([held], ServoReplay.from_model(nominal_env.models[0]))
    dr = DomainRandomization.from_sysid(fit, n_sigma=2.0, base=DomainRandomization.off())
    fitted_env = sim.make("mujoco/fr3-reach", num_envs=2, seed=0, randomization=dr)
    fitted_env.reset(seed=0)
    for model in fitted_env.models:
        replay = ServoReplay.from_model(model)
        damping = model.dof_damping[replay.dof_adr]
        lo = fit.mean["joint_damping"] - 2 * fit.std["joint_damping"] - 1e-9
        hi = fit.mean["joint_damping"] + 2 * fit.std["joint_damping"] + 1e-9
        assert np.all((damping >= lo) & (damping <= hi))  # sampled around the fit
        fitted, _ = prediction_error([held], replay)
        print(
            f"held-out prediction error: nominal {nominal:.4g}, fitted {fitted:.4g} ({nominal / fitted:.1f}x)"
        )
        assert fitted * 5 < nominal, (fitted, nominal)
    nominal_env.close()
    fitted_env.close()
