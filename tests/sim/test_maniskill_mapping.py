"""ManiSkill mapping logic on synthetic arrays, and its signs checked end to end on CPU physics."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.rotations import quat_multiply, rotvec_to_matrix
from sim.maniskill.mapping import (
    ControllerScales,
    robot_state,
    rotvec_to_euler_xyz,
    task_fields,
    to_maniskill_action,
)

JOINT = ControllerScales(-0.1, 0.1, -0.1, -0.01, 0.04)
EE = ControllerScales(-0.1, 0.1, -0.1, -0.01, 0.04)


def _euler_xyz_matrix(e):
    a, b, c = e
    rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    ry = np.array([[np.cos(b), 0, np.sin(b)], [0, 1, 0], [-np.sin(b), 0, np.cos(b)]])
    rz = np.array([[np.cos(c), -np.sin(c), 0], [np.sin(c), np.cos(c), 0], [0, 0, 1]])
    return rx @ ry @ rz


def test_rotvec_to_euler_round_trips_through_matrices():
    r = np.random.default_rng(0).uniform(-0.5, 0.5, (50, 3))
    e = rotvec_to_euler_xyz(r)
    for i in range(50):
        np.testing.assert_allclose(_euler_xyz_matrix(e[i]), rotvec_to_matrix(r[i : i + 1])[0], atol=1e-12)


def test_matches_maniskills_own_euler_convention():
    rc = pytest.importorskip("mani_skill.utils.geometry.rotation_conversions")
    import torch

    r = np.random.default_rng(1).uniform(-0.3, 0.3, (20, 3))
    theirs = rc.euler_angles_to_matrix(torch.as_tensor(rotvec_to_euler_xyz(r)), "XYZ").numpy()
    np.testing.assert_allclose(theirs, rotvec_to_matrix(r), atol=1e-6)


def test_joint_delta_and_gripper_scaling():
    a = np.array([[0.05, -0.1, 0, 0, 0, 0, 0.02, 0.08], [0, 0, 0, 0, 0, 0, 0, 0.0]])
    ms = to_maniskill_action(a, "joint_delta", True, JOINT)
    assert ms.shape == (2, 8) and ms.dtype == np.float32
    np.testing.assert_allclose(ms[0, :7], [0.5, -1, 0, 0, 0, 0, 0.2], atol=1e-6)
    assert ms[0, 7] == pytest.approx(1.0)  # 8 cm open = 4 cm per finger = top of [-0.01, 0.04]
    assert ms[1, 7] == pytest.approx(2 * 0.01 / 0.05 - 1)  # closed
    held = to_maniskill_action(a[:, :7], "joint_delta", False, JOINT, hold_width=0.08)
    np.testing.assert_allclose(held[:, 7], 1.0)


def test_ee_delta_rotation_sign_follows_maniskills_negative_scale():
    a = np.array([[0.02, 0, -0.01, 0, 0, 0.05, 0.04]])
    ms = to_maniskill_action(a, "ee_delta", True, EE)
    np.testing.assert_allclose(ms[0, :3], [0.2, 0, -0.1], atol=1e-6)
    # ManiSkill multiplies the normalized rotation by rot_lower (-0.1): +0.05 rad -> -0.5
    np.testing.assert_allclose(ms[0, 3:6], [0, 0, -0.5], atol=1e-6)


def test_robot_state_moves_poses_into_the_base_frame():
    n = 2
    qpos = np.tile(np.r_[np.arange(7) * 0.1, 0.02, 0.015], (n, 1))
    qvel = np.ones((n, 9))
    yaw = np.pi / 2
    root_q = np.array([np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)])
    root = np.tile(np.r_[-0.615, 0.1, 0.0, root_q], (n, 1))
    down = np.array([0.0, 1.0, 0.0, 0.0])
    tcp_world_q = quat_multiply(root_q, down)  # pointing down, yawed with the base
    tcp = np.tile(np.r_[-0.615, 0.6, 0.2, -tcp_world_q], (n, 1))  # sign-flipped on purpose
    s = robot_state(qpos, qvel, tcp, root)
    assert s.shape == (n, 22) and s.dtype == np.float32
    np.testing.assert_allclose(s[0, 14:17], [0.5, 0.0, 0.2], atol=1e-6)  # 0.5 m in front of the base
    np.testing.assert_allclose(s[0, 17:21], down, atol=1e-6)  # canonical sign: q . down >= 0
    assert s[0, 21] == pytest.approx(0.035)


def test_task_fields_are_sorted_named_columns():
    extra = {
        "tcp_pose": np.zeros((2, 7)),
        "obj_pose": np.ones((2, 7)),
        "goal_pos": np.full((2, 3), 2.0),
        "is_grasped": np.array([True, False]),
    }
    names, values = task_fields(extra, 2)
    assert names == (("goal_pos", 3), ("is_grasped", 1), ("obj_pose", 7))
    assert (
        values.shape == (2, 11) and values.dtype == np.float32 and values[0, 3] == 1.0 and values[1, 3] == 0.0
    )


@pytest.mark.slow
def test_signs_end_to_end_on_cpu_physics():
    """+z rotation and +x translation in our units move the ManiSkill Panda that way (base frame)."""
    pytest.importorskip("mani_skill")
    import sim
    from rlinf_robot.rotations import rotvec_between

    env = sim.make("maniskill/push-cube", num_envs=1)
    try:
        obs = env.reset(seed=0)
        sl = env.obs_spec.state_slices()
        p0, q0 = obs["state"][0, sl["tcp_pos"]].copy(), obs["state"][0, sl["tcp_quat"]].astype(np.float64)
        a = np.array([[0.02, 0, 0, 0, 0, 0.075, 0.08]], np.float32)
        for _ in range(3):
            obs = env.step(a)[0]
        p1, q1 = obs["state"][0, sl["tcp_pos"]], obs["state"][0, sl["tcp_quat"]].astype(np.float64)
        assert p1[0] - p0[0] > 0.01 and abs(p1[1] - p0[1]) < 0.01
        r = rotvec_between(q0[None], q1[None])[0]
        assert r[2] > 0.05 and abs(r[0]) < 0.03 and abs(r[1]) < 0.03
    finally:
        env.close()
