"""Sim actions mean what they mean on the arm: the same safety semantics, and the arm follows."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from rlinf_robot.safety import ArmAction, RobotState, SafetyFilter
from rlinf_robot.safety.kinematics import fr3_forward_kinematics
from rlinf_robot.safety.rotations import quat_angle, quat_conjugate, quat_from_matrix, quat_multiply
from sim.mujoco.control import ActionMapper
from sim.mujoco.tasks.base import READY_Q

HZ = 20.0


def states(n, seed):
    rng = np.random.default_rng(seed)
    q = READY_Q + rng.uniform(-0.3, 0.3, (n, 7))
    t = fr3_forward_kinematics(q)
    return q, t


def jacobian(q, eps=1e-6):
    """Numerical TCP Jacobian from our FK: linear rows, then world-frame angular rows."""
    n = len(q)
    jac = np.zeros((n, 6, 7))
    t0 = fr3_forward_kinematics(q)
    for j in range(7):
        dq = q.copy()
        dq[:, j] += eps
        t1 = fr3_forward_kinematics(dq)
        jac[:, :3, j] = (t1[:, :3, 3] - t0[:, :3, 3]) / eps
        dr = t1[:, :3, :3] @ t0[:, :3, :3].transpose(0, 2, 1)
        jac[:, 3:, j] = np.stack([dr[:, 2, 1] - dr[:, 1, 2], dr[:, 0, 2] - dr[:, 2, 0], dr[:, 1, 0] - dr[:, 0, 1]], 1) / (2 * eps)
    return jac


def test_joint_delta_matches_the_safety_filter():
    q, t = states(64, 0)
    delta = np.random.default_rng(1).uniform(-0.12, 0.12, (64, 7))
    mapper = ActionMapper("joint_delta", False, HZ)
    ours, _ = mapper.targets(delta, q, t[:, :3, 3], jacobian(q))
    filt = SafetyFilter(control_hz=HZ)
    for i in range(64):
        safe = filt.check(ArmAction("joint_delta", delta[i]), RobotState(q[i]))
        if "clamped_workspace" in safe.adjustments:
            continue  # the filter bisects on exact FK, we on the linearized path: checked below
        np.testing.assert_allclose(ours[i], safe.target, atol=1e-12)


def test_ee_delta_reaches_the_filters_tcp_target():
    q, t = states(64, 2)
    rng = np.random.default_rng(3)
    act = np.concatenate([rng.uniform(-0.03, 0.03, (64, 3)), rng.uniform(-0.12, 0.12, (64, 3))], axis=1)
    mapper = ActionMapper("ee_delta", False, HZ)
    target_q, _ = mapper.targets(act, q, t[:, :3, 3], jacobian(q))
    reached = fr3_forward_kinematics(target_q)
    filt = SafetyFilter(control_hz=HZ)
    for i in range(64):
        safe = filt.check(ArmAction("ee_delta", act[i]), RobotState(q[i]))
        # One damped-least-squares step: a second-order error, worst for the largest combined
        # translation + rotation step; the next tick starts from the measured pose, so it never adds up.
        assert np.linalg.norm(reached[i, :3, 3] - safe.target[:3]) < 3e-3
        assert quat_angle(quat_from_matrix(reached[i, :3, :3]), safe.target[3:]) < 0.015  # of <= 0.075 rad


def test_workspace_floor_holds_for_both_modes():
    q = np.array([[0.0, 0.55, 0.0, -2.0, 0.0, 2.55, 0.785]])
    t = fr3_forward_kinematics(q)
    z = t[0, 2, 3]
    assert 0.05 < z < 0.12
    down = np.array([[0.0, 0.0, -0.02, 0.0, 0.0, 0.0]])
    for _ in range(10):  # push down repeatedly, re-measuring like the env does
        q, _ = ActionMapper("ee_delta", False, HZ).targets(down, q, fr3_forward_kinematics(q)[:, :3, 3], jacobian(q))
    assert fr3_forward_kinematics(q)[0, 2, 3] > 0.0495
    qj = np.array([[0.0, 0.55, 0.0, -2.0, 0.0, 2.55, 0.785]])
    for _ in range(10):  # joint 2 forward lowers the TCP
        qj, _ = ActionMapper("joint_delta", False, HZ).targets(
            np.array([[0, 0.05, 0, 0, 0, 0, 0]]), qj, fr3_forward_kinematics(qj)[:, :3, 3], jacobian(qj))
    assert fr3_forward_kinematics(qj)[0, 2, 3] > 0.0495


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_the_simulated_arm_follows_an_ee_delta_within_a_tick(axis):
    env = sim.make("mujoco/fr3-reach", num_envs=1)
    try:
        obs = env.reset(seed=4)
        sl = env.obs_spec.state_slices()
        p0 = obs["state"][0, sl["tcp_pos"]].astype(np.float64)
        a = np.zeros((1, 6), np.float32)
        a[0, axis] = 0.02
        moved = env.step(a)[0]["state"][0, sl["tcp_pos"]] - p0
        assert 0.6 * 0.02 < moved[axis] < 1.1 * 0.02
        assert np.abs(np.delete(moved, axis)).max() < 0.004
    finally:
        env.close()


def test_the_simulated_arm_rotates_the_right_way():
    env = sim.make("mujoco/fr3-reach", num_envs=1)
    try:
        obs = env.reset(seed=4)
        sl = env.obs_spec.state_slices()
        q0 = obs["state"][0, sl["tcp_quat"]].astype(np.float64)
        a = np.zeros((1, 6), np.float32)
        a[0, 5] = 0.07  # about base z
        for _ in range(3):
            obs = env.step(a)[0]
        q1 = obs["state"][0, sl["tcp_quat"]].astype(np.float64)
        rel = quat_multiply(q1, quat_conjugate(q0))  # world-frame rotation taking q0 to q1
        rel *= np.sign(rel[0])
        assert rel[3] > 0.05 and abs(rel[1]) < 0.02 and abs(rel[2]) < 0.02  # about +z, by ~0.2 rad
    finally:
        env.close()


def test_gripper_column_is_the_finger_opening():
    env = sim.make("mujoco/fr3-reach", num_envs=1, gripper=True)
    try:
        env.reset(seed=0)
        a = np.zeros((1, 7), np.float32)
        a[0, 6] = 0.03
        widths = []
        for _ in range(16):  # the Franka Hand is slow too: ~0.1 m/s
            widths.append(float(env.step(a)[0]["state"][0, env.obs_spec.state_slices()["gripper_width"]][0]))
        assert np.all(np.diff(widths) <= 1e-4)
        assert abs(widths[-1] - 0.03) < 0.003
    finally:
        env.close()
