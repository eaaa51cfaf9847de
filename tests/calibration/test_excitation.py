"""Excitation plans stay inside the safety limits, or are refused before anything moves."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.excitation import ExcitationConfig, plan_excitation
from rlinf_robot.errors import ConfigError, SafetyViolation
from rlinf_robot.robot.franka.model import forward_kinematics
from rlinf_robot.safety import SafetyLimits


def test_plan_is_a_sum_of_sines_that_starts_and_ends_at_rest_inside_the_limits():
    limits = SafetyLimits.from_yaml()
    plan = plan_excitation(ExcitationConfig(duration_s=4.0, seed=3), limits)
    assert np.allclose(plan.position[0], plan.start) and np.allclose(plan.position[-1], plan.start, atol=1e-9)
    assert np.allclose(plan.velocity[[0, -1]], 0.0, atol=1e-9)
    assert np.all(plan.position >= limits.q_lo) and np.all(plan.position <= limits.q_hi)
    assert np.all(plan.peak_velocity <= 0.9 * limits.joint_velocity_max * limits.velocity_scale + 1e-9)
    tcp = forward_kinematics(plan.position[::25])[:, :3, 3]
    assert np.all(tcp >= limits.workspace_min) and np.all(tcp <= limits.workspace_max)
    # The waypoints the arm gets (velocity ramps between them) integrate back to the planned path.
    v = np.vstack([np.zeros(7), plan.waypoint_velocity])
    integrated = plan.start + np.cumsum((v[1:] + v[:-1]) / 2, axis=0) * plan.waypoint_dt
    idx = np.round(plan.waypoint_t * 1000).astype(int)
    assert np.abs(integrated - plan.position[idx]).max() < 0.01
    # Every joint is excited and the joints are not in lockstep.
    assert np.all(np.ptp(plan.position, axis=0) > 0.05)
    corr = np.corrcoef(plan.velocity.T)
    assert np.abs(corr[np.triu_indices(7, 1)]).max() < 0.95


def test_plan_that_would_leave_the_joint_range_is_refused():
    start = (0.0, -0.1, 0.0, -2.0, 0.0, 1.9, 2.9)  # joint 7 just inside its upper limit
    with pytest.raises(SafetyViolation, match="joint 7"):
        plan_excitation(ExcitationConfig(start=start))


def test_plan_that_would_leave_the_workspace_box_is_refused():
    from dataclasses import replace

    limits = SafetyLimits.from_yaml()
    tight = replace(limits, workspace_max=np.array([0.56, 0.45, 0.85]))  # start TCP is at x ~0.53
    with pytest.raises(SafetyViolation, match="workspace"):
        plan_excitation(ExcitationConfig(), tight)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"duration_s": 0.1},
        {"harmonics": ()},
        {"amplitude": (0.1,) * 6},
        {"velocity_fraction": 1.5},
        {"start": (0.0,) * 6},
        {"waypoint_dt": 2.0},
    ],
)
def test_bad_config_names_the_key(kwargs):
    with pytest.raises(ConfigError, match="excitation"):
        ExcitationConfig(**kwargs)
