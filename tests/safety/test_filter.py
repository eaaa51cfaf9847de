"""Safety filter properties: nothing accepted leaves the joint limits or the box, NaN never passes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.model import HOME_Q, tcp_pose, tcp_position
from rlinf_robot.rotations import quat_angle
from rlinf_robot.safety import (
    ArmAction,
    Rejection,
    RobotState,
    SafeAction,
    SafetyFilter,
    SafetyLimits,
)

LIMITS = SafetyLimits.from_yaml()
FILTER = SafetyFilter(LIMITS, control_hz=100.0)


def tcp(q):
    return tcp_position(q, LIMITS.tcp_offset)


def inside_box(p, tol=1e-9):
    return bool(np.all(p >= LIMITS.workspace_min - tol) and np.all(p <= LIMITS.workspace_max + tol))


@st.composite
def safe_states(draw):
    """Joint configurations inside the limits whose TCP is inside the box."""
    u = draw(st.lists(st.floats(-0.6, 0.6), min_size=7, max_size=7))
    q = np.clip(HOME_Q + np.array(u), LIMITS.q_lo, LIMITS.q_hi)
    assume(inside_box(tcp(q)))
    return q


finite = st.floats(-3, 3, allow_nan=False)
maybe_bad = st.one_of(finite, st.just(float("nan")), st.just(float("inf")), st.just(-float("inf")))


@settings(max_examples=300, deadline=None)
@given(
    q=safe_states(),
    values=st.lists(finite, min_size=7, max_size=7),
    mode=st.sampled_from(["joint_position", "joint_delta"]),
)
def test_accepted_joint_targets_stay_in_limits_and_box(q, values, mode):
    v = np.array(values) if mode == "joint_delta" else HOME_Q + np.array(values) * 0.3
    r = FILTER.check(ArmAction(mode, v), RobotState(joint_pos=q))
    if r:
        assert r.mode == "joint_position"
        assert np.all(r.target >= LIMITS.q_lo - 1e-12) and np.all(r.target <= LIMITS.q_hi + 1e-12)
        assert inside_box(tcp(r.target))
        assert np.all(np.abs(r.target - q) <= LIMITS.joint_step_limit(100.0) + 1e-12)


@settings(max_examples=300, deadline=None)
@given(q=safe_states(), d=st.lists(st.floats(-0.5, 0.5), min_size=6, max_size=6))
def test_accepted_ee_deltas_stay_in_box_and_step(q, d):
    r = FILTER.check(ArmAction("ee_delta", np.array(d)), RobotState(joint_pos=q))
    assert r, r  # deltas are clamped, not rejected, from a state inside the box
    assert r.mode == "ee_target" and inside_box(r.target[:3])
    assert np.linalg.norm(r.target[:3] - tcp(q)) <= LIMITS.ee_step_limit(100.0)[0] + 1e-9
    assert abs(np.linalg.norm(r.target[3:]) - 1) < 1e-9


@settings(max_examples=200, deadline=None)
@given(q=safe_states(), p=st.lists(st.floats(-1.0, 1.5), min_size=3, max_size=3))
def test_ee_targets_outside_box_rejected_inside_accepted(q, p):
    target = np.concatenate([p, tcp_pose(q, LIMITS.tcp_offset)[3:]])
    r = FILTER.check(ArmAction("ee_target", target), RobotState(joint_pos=q))
    if inside_box(np.array(p)):
        assert r and inside_box(r.target[:3])
    else:
        assert isinstance(r, Rejection) and r.reason == "workspace"


@settings(max_examples=300, deadline=None)
@given(
    q=safe_states(),
    values=st.lists(maybe_bad, min_size=7, max_size=7),
    mode=st.sampled_from(["joint_position", "joint_delta", "ee_target"]),
    grip=st.one_of(st.none(), maybe_bad),
)
def test_nan_and_inf_never_pass(q, values, mode, grip):
    v = np.array(values)
    assume(not np.all(np.isfinite(v)) or (grip is not None and not np.isfinite(grip)))
    r = FILTER.check(ArmAction(mode, v, gripper=grip), RobotState(joint_pos=q))
    assert isinstance(r, Rejection) and r.reason == "non_finite"


def test_nan_in_state_rejected():
    q = HOME_Q.copy()
    q[2] = np.nan
    r = FILTER.check(ArmAction("joint_delta", np.zeros(7)), RobotState(joint_pos=q))
    assert not r and r.reason == "non_finite"


def test_absolute_joint_target_outside_limits_rejected_delta_clamped():
    f = SafetyFilter(LIMITS, control_hz=1.0)
    q = HOME_Q.copy()
    q[6] = LIMITS.q_hi[6] - 0.01  # near joint 7's upper limit (joint 7 does not move the TCP)
    far = q.copy()
    far[6] = 3.1  # beyond the limit (3.0159)
    r = f.check(ArmAction("joint_position", far), RobotState(joint_pos=q))
    assert not r and r.reason == "joint_limit" and "7" in r.detail
    r = f.check(ArmAction("joint_delta", np.eye(7)[6] * 0.2), RobotState(joint_pos=q))
    assert r and "clamped_joint_limit" in r.adjustments
    assert r.target[6] == pytest.approx(LIMITS.q_hi[6])


def test_step_is_scaled_down_not_rejected():
    r = FILTER.check(ArmAction("joint_delta", np.full(7, 0.3)), RobotState(joint_pos=HOME_Q))
    assert r and "scaled_step" in r.adjustments
    step = r.target - HOME_Q
    assert np.max(np.abs(step) / LIMITS.joint_step_limit(100.0)) == pytest.approx(1.0)
    np.testing.assert_allclose(step / np.linalg.norm(step), np.ones(7) / np.sqrt(7))  # direction kept


def test_rotation_step_is_limited():
    r = FILTER.check(ArmAction("ee_delta", np.array([0, 0, 0, 0, 0, 1.0])), RobotState(joint_pos=HOME_Q))
    assert r and "scaled_rotation" in r.adjustments
    assert quat_angle(tcp_pose(HOME_Q)[3:], r.target[3:]) == pytest.approx(LIMITS.ee_step_limit(100.0)[1])


def test_bad_quaternion_and_shapes_and_modes():
    assert (
        FILTER.check(
            ArmAction("ee_target", np.array([0.5, 0, 0.5, 2, 0, 0, 0])), RobotState(joint_pos=HOME_Q)
        ).reason
        == "bad_quaternion"
    )
    assert FILTER.check(ArmAction("joint_delta", np.zeros(6)), RobotState(joint_pos=HOME_Q)).reason == "shape"
    assert FILTER.check(ArmAction("fly", np.zeros(7)), RobotState(joint_pos=HOME_Q)).reason == "unknown_mode"


def test_gripper_clamped_to_range():
    r = FILTER.check(ArmAction("joint_delta", np.zeros(7), gripper=0.5), RobotState(joint_pos=HOME_Q))
    assert r and r.gripper == LIMITS.gripper_width_max and "clamped_gripper" in r.adjustments


def test_workspace_policy_configurable():
    raw = dict(
        joint_position_min=LIMITS.joint_position_min.tolist(),
        joint_position_max=LIMITS.joint_position_max.tolist(),
        joint_velocity_max=LIMITS.joint_velocity_max.tolist(),
        workspace_min=[0.25, -0.45, 0.05],
        workspace_max=[0.8, 0.45, 0.85],
        on_workspace_violation={"ee_target": "clamp", "ee_delta": "reject"},
        max_ee_step=10.0,
        max_ee_speed=10.0,
    )
    f = SafetyFilter(SafetyLimits.from_dict(raw), control_hz=1.0)
    up = np.array([0, 0, 2.0, 0, 0, 0])
    r = f.check(ArmAction("ee_delta", up), RobotState(joint_pos=HOME_Q))
    assert not r and r.reason == "workspace"
    r = f.check(
        ArmAction("ee_target", np.concatenate([[0.5, 0, 2.0], tcp_pose(HOME_Q)[3:]])),
        RobotState(joint_pos=HOME_Q),
    )
    assert r and r.target[2] == pytest.approx(0.85)


def test_counters_record_every_decision():
    f = SafetyFilter(LIMITS, control_hz=100.0)
    f.check(ArmAction("joint_delta", np.zeros(7)), RobotState(joint_pos=HOME_Q))
    f.check(ArmAction("joint_delta", np.full(7, np.nan)), RobotState(joint_pos=HOME_Q))
    f.check(ArmAction("joint_delta", np.full(7, 1.0)), RobotState(joint_pos=HOME_Q))
    c = f.snapshot()
    assert c["checked"] == 3 and c["accepted"] == 2 and c["rejected"] == 1
    assert c["rejected_non_finite"] == 1 and c["scaled_step"] == 1


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"velocity_scale": 1.5}, "velocity_scale"),
        ({"workspace_min": [1, 1, 1]}, "workspace_min"),
        ({"workspace_max": [0, 0]}, "workspace_max"),
        ({"on_workspace_violation": {"ee_target": "ignore"}}, "on_workspace_violation.ee_target"),
        ({"bogus": 1}, "bogus"),
        ({"max_ee_step": 0}, "max_ee_step"),
    ],
)
def test_bad_limits_file_names_the_key(patch, key, tmp_path):
    import yaml

    raw = yaml.safe_load(open(__import__("rlinf_robot.safety", fromlist=["x"]).DEFAULT_LIMITS_FILE))
    raw.update(patch)
    path = tmp_path / "limits.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=key.split(".")[0]):
        SafetyLimits.from_yaml(path)


def test_a_zero_delta_at_home_passes():
    """(FK itself is checked against MuJoCo in tests/robot/test_fr3_model.py.)"""
    assert isinstance(
        FILTER.check(ArmAction("joint_delta", np.zeros(7)), RobotState(joint_pos=HOME_Q)), SafeAction
    )
