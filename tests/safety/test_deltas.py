"""The delta rule the sims and the bridge share (``rlinf_robot.safety.deltas``), on exact FK."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.envs.tasks import READY_Q
from rlinf_robot.robot.franka import model
from rlinf_robot.rotations import quat_angle, quat_from_matrix, rotvec_between
from rlinf_robot.safety import SafetyLimits
from rlinf_robot.safety.deltas import DeltaRule

HZ = 20.0
LIMITS = SafetyLimits.from_yaml()


def configs(n, seed, spread=0.3):
    return READY_Q + np.random.default_rng(seed).uniform(-spread, spread, (n, 7))


@pytest.mark.parametrize("mode", ["joint_delta", "ee_delta"])
def test_rows_compose_exactly(mode):
    """One 6-row chunk = two 3-row chunks, the second anchored where the first ended: what a chunk
    commands does not depend on how it is cut (the property the old measured-anchor rule lacked)."""
    rule = DeltaRule(mode, False, HZ)
    q0 = configs(16, 0)
    width = 7 if mode == "joint_delta" else 6
    rows = np.random.default_rng(1).uniform(-0.01, 0.01, (16, 6, width))
    whole = rule.plan(q0, rows).targets
    first = rule.plan(q0, rows[:, :3]).targets
    second = rule.plan(first[:, -1], rows[:, 3:]).targets
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), whole, atol=1e-12)


def test_joint_rows_add_up_to_their_sum():
    rule = DeltaRule("joint_delta", False, HZ)
    rows = np.tile(np.linspace(-0.01, 0.01, 7), (5, 1))
    plan = rule.plan(READY_Q, rows)
    np.testing.assert_allclose(plan.targets[-1] - READY_Q, rows.sum(axis=0), atol=1e-12)
    assert not plan.scaled.any() and not plan.clamped.any()


def test_ee_rows_move_the_tcp_by_each_row_on_exact_fk():
    """Each row's TCP step and rotation, exactly (1e-6 m / 1e-5 rad), from the previous target."""
    rule = DeltaRule("ee_delta", False, HZ)
    rng = np.random.default_rng(2)
    q0 = configs(32, 3, 0.2)
    rows = np.concatenate(
        [rng.uniform(-0.011, 0.011, (32, 4, 3)), rng.uniform(-0.05, 0.05, (32, 4, 3))], axis=2
    )
    plan = rule.plan(q0, rows)
    poses = model.forward_kinematics(np.concatenate([q0[:, None], plan.targets], axis=1).reshape(-1, 7))
    poses = poses.reshape(32, 5, 4, 4)
    ok = ~(plan.scaled | plan.clamped)
    assert ok.mean() > 0.9
    for i, k in zip(*np.nonzero(ok), strict=True):
        step = poses[i, k + 1, :3, 3] - poses[i, k, :3, 3]
        assert np.linalg.norm(step - rows[i, k, :3]) < 1e-6
        rot = rotvec_between(quat_from_matrix(poses[i, k, :3, :3]), quat_from_matrix(poses[i, k + 1, :3, :3]))
        assert np.linalg.norm(rot - rows[i, k, 3:]) < 1e-5


def test_joint_rows_planned_at_once_equal_row_by_row():
    """The all-rows-at-once path for joint rows gives exactly what the row-by-row rule gives:
    oversized rows, rows past a joint limit, and batches where some env leaves the box (those
    take the row-by-row path) alike."""
    rng = np.random.default_rng(3)
    near, far = configs(16, 4, spread=0.1), configs(64, 2, spread=0.6)
    near[:4, 6] = LIMITS.q_hi[6] - 0.01  # rows that run into joint 7's limit
    fast, slow = DeltaRule("joint_delta", False, HZ), DeltaRule("joint_delta", False, HZ)
    slow._joint_rows_in_box = lambda q, d: None
    taken = []
    for q0 in (near, far, near[:1], near[5:6]):
        for scale in (0.005, 0.05, 0.2):  # within a tick, over it, far over it (out of the box)
            rows = rng.uniform(-scale, scale, (len(q0), 8, 7))
            rows[:4, :, 6] = abs(rows[:4, :, 6])
            taken.append(fast._joint_rows_in_box(q0, rows) is not None)
            a, b = fast.plan(q0, rows), slow.plan(q0, rows)
            np.testing.assert_array_equal(a.targets, b.targets)
            np.testing.assert_array_equal(a.scaled, b.scaled)
            np.testing.assert_array_equal(a.clamped, b.clamped)
    assert any(taken) and not all(taken), taken  # both paths were compared


def test_an_oversized_row_is_scaled_as_a_whole_and_flagged():
    rule = DeltaRule("ee_delta", False, 10.0)  # (at 20 Hz the joints' velocity budget binds first)
    plan = rule.plan(READY_Q, np.array([[0.06, 0.0, -0.03, 0.0, 0.0, 0.0]]))
    step = model.tcp_position(plan.targets[0]) - model.tcp_position(READY_Q)
    assert plan.scaled[0] and np.linalg.norm(step) == pytest.approx(rule.ee_step, rel=1e-4)
    np.testing.assert_allclose(
        step / np.linalg.norm(step), np.array([2.0, 0.0, -1.0]) / np.sqrt(5), atol=1e-4
    )
    jrule = DeltaRule("joint_delta", False, HZ)
    joint = jrule.plan(READY_Q, np.array([[0.6, 0, 0, 0, 0, 0.1, 0]]))
    assert joint.scaled[0] and np.max(np.abs(joint.targets[0] - READY_Q)) == pytest.approx(
        jrule.joint_step[0]
    )


@pytest.mark.parametrize("mode", ["joint_delta", "ee_delta"])
def test_the_workspace_floor_holds(mode):
    q = np.array([0.0, 0.55, 0.0, -2.0, 0.0, 2.55, 0.785])
    z0 = model.tcp_position(q)[2]
    assert 0.05 < z0 < 0.12
    down = (
        np.array([0.0, 0.0, -0.02, 0.0, 0.0, 0.0])
        if mode == "ee_delta"
        else np.array([0, 0.05, 0, 0, 0, 0, 0])
    )
    plan = DeltaRule(mode, False, HZ).plan(q, np.tile(down, (10, 1)))
    z = model.tcp_position(plan.targets)[:, 2]
    assert np.all(z >= LIMITS.workspace_min[2] - 1e-9) and plan.clamped[-1]


def test_a_rotation_a_joint_limit_blocks_is_lost_not_wound_up():
    """Rotating the wrist past joint 7's limit stops there; rotating back moves at once."""
    rule = DeltaRule("joint_delta", False, HZ)
    q = READY_Q.copy()
    q[6] = LIMITS.q_hi[6] - 0.01
    up = np.zeros((10, 7))
    up[:, 6] = 0.05
    plan = rule.plan(q, up)
    assert plan.targets[-1, 6] == pytest.approx(LIMITS.q_hi[6]) and plan.clamped[1:].all()
    back = rule.plan(plan.targets[-1], -up[:1])
    assert back.targets[0, 6] == pytest.approx(LIMITS.q_hi[6] - 0.05)


def test_the_anchor_is_the_commanded_target_within_the_lead():
    rule = DeltaRule("joint_delta", False, HZ)
    measured = READY_Q.copy()
    np.testing.assert_array_equal(rule.anchor(None, measured), measured)
    np.testing.assert_allclose(rule.anchor(measured + 0.05, measured), measured + 0.05)
    far = rule.anchor(measured + np.r_[1.0, np.zeros(6)], measured)
    assert far[0] - measured[0] == pytest.approx(rule.max_lead)
    # a lagging shoulder shortens the lead of every joint alike: the arm still heads for the target
    lag = np.r_[0.0, 4.0, 1.0, -2.0, 0.0, 0.5, 0.0] * rule.max_lead
    lead = rule.anchor(measured + lag, measured) - measured
    np.testing.assert_allclose(lead, lag / 4.0)
    batch = rule.anchor(np.stack([measured + lag, measured + 0.01]), np.stack([measured, measured]))
    np.testing.assert_allclose(batch - measured, np.stack([lag / 4.0, np.full(7, 0.01)]))


def test_gripper_column_is_an_absolute_width_clamped_to_the_hand():
    plan = DeltaRule("ee_delta", True, HZ).plan(
        READY_Q, np.array([[0, 0, 0, 0, 0, 0, 0.03], [0, 0, 0, 0, 0, 0, 0.2]])
    )
    np.testing.assert_allclose(plan.widths, [0.03, LIMITS.gripper_width_max])
    assert plan.clamped.tolist() == [False, True]


def test_bad_rows_raise():
    rule = DeltaRule("ee_delta", False, HZ)
    with pytest.raises(ValueError, match="NaN"):
        rule.plan(READY_Q, np.array([[np.nan, 0, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="rows must be"):
        rule.plan(READY_Q, np.zeros((2, 7)))
    assert quat_angle(np.array([1.0, 0, 0, 0]), np.array([1.0, 0, 0, 0])) == 0.0
