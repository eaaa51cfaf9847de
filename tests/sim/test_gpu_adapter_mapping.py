"""Isaac Lab and RoboTwin mapping logic, on arrays recorded from our MuJoCo FR3 and on synthetic ones.

Neither simulator runs here (GPU, Python 3.12 / 3.11 venvs); benchmarks/gpu_check.sh runs them.
"""

from __future__ import annotations

import numpy as np
import pytest

import sim
from rlinf_robot.robot.franka.model import GRIPPER_MAX_WIDTH, HOME_Q, TCP_OFFSET, forward_kinematics
from rlinf_robot.rotations import quat_from_matrix, quat_multiply, quat_rotate, rotvec_to_matrix
from sim.isaaclab import mapping as il
from sim.robotwin import mapping as rt


@pytest.fixture(scope="module")
def recorded():
    """Hand-body and TCP poses of the simulated FR3 along a short random rollout."""
    import mujoco

    env = sim.make("mujoco/fr3-reach", num_envs=4, action_mode="joint_delta")
    try:
        env.reset(seed=0)
        hand = mujoco.mj_name2id(env.models[0], mujoco.mjtObj.mjOBJ_BODY, "hand")
        rows = {"q": [], "qd": [], "hand_pos": [], "hand_quat": [], "tcp": [], "state": []}
        rng = np.random.default_rng(0)
        for _ in range(5):
            obs = env.step(rng.uniform(-0.05, 0.05, (4, 7)).astype(np.float32))[0]
            for d in env.datas:
                rows["q"].append(d.qpos[:9].copy())
                rows["qd"].append(d.qvel[:9].copy())
                rows["hand_pos"].append(d.xpos[hand].copy())
                rows["hand_quat"].append(d.xquat[hand].copy())
            rows["state"].append(obs["state"])
        return {k: np.asarray(v) if k != "state" else np.concatenate(v) for k, v in rows.items()}
    finally:
        env.close()


@pytest.mark.parametrize("order", ["wxyz", "xyzw"])
def test_isaaclab_state_from_recorded_fr3_with_an_env_origin(recorded, order):
    n = len(recorded["q"])
    yaw = 0.7
    root_q = np.tile([np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)], (n, 1))
    root_p = np.tile([2.0, -3.0, 0.5], (n, 1))  # this env's origin in Isaac's world
    hand_q_w = quat_multiply(root_q, recorded["hand_quat"])
    hand_p_w = root_p + quat_rotate(root_q, recorded["hand_pos"])
    to_order = (lambda q: q[:, [1, 2, 3, 0]]) if order == "xyzw" else (lambda q: q)
    state = il.robot_state(
        recorded["q"], recorded["qd"], hand_p_w, to_order(hand_q_w), root_p, to_order(root_q), order
    )
    np.testing.assert_allclose(
        state, recorded["state"][:, :22], atol=2e-5
    )  # same TCP, quaternion sign, width


def test_isaaclab_ee_delta_moves_the_ik_point_so_the_tcp_moves_as_commanded():
    rng = np.random.default_rng(1)
    n = 32
    q = HOME_Q + rng.uniform(-0.3, 0.3, (n, 7))
    t = forward_kinematics(q)
    tcp, rot_now = t[:, :3, 3], t[:, :3, :3]
    quat = quat_from_matrix(rot_now)
    act = np.concatenate(
        [
            rng.uniform(-0.02, 0.02, (n, 3)),
            rng.uniform(-0.07, 0.07, (n, 3)),
            rng.uniform(0, GRIPPER_MAX_WIDTH, (n, 1)),
        ],
        axis=1,
    )
    raw = il.ee_delta_action(act, quat, scale=0.5, ik_offset=0.107, gripper=True)
    assert raw.shape == (n, 7) and raw.dtype == np.float32
    d = np.array([0, 0, 0.107 - TCP_OFFSET])
    ik_point = tcp + rot_now @ d
    moved = ik_point + raw[:, :3].astype(np.float64) * 0.5  # what Isaac Lab's IK term targets
    rot_new = rotvec_to_matrix(act[:, 3:6]) @ rot_now
    expected = tcp + act[:, :3] + rot_new @ d  # our TCP moved by dxyz, rotated about itself
    np.testing.assert_allclose(moved, expected, atol=1e-6)
    np.testing.assert_allclose(raw[:, 3:6] * 0.5, act[:, 3:6], atol=1e-6)
    np.testing.assert_array_equal(raw[:, 6], np.where(act[:, 6] > 0.04, 1.0, -1.0))


def test_isaaclab_joint_delta_and_quaternion_orders():
    a = np.array([[0.01, -0.02, 0, 0, 0, 0, 0.03, 0.0]])
    raw = il.joint_delta_action(a, gripper=True)
    np.testing.assert_allclose(raw[0, :7], a[0, :7], atol=1e-7)
    assert raw[0, 7] == -1.0
    assert il.joint_delta_action(a[:, :7], gripper=False)[0, 7] == 1.0  # no column: held open
    q = np.array([[0.1, 0.2, 0.3, 0.9]])
    np.testing.assert_array_equal(il.to_wxyz(q, "xyzw"), [[0.9, 0.1, 0.2, 0.3]])
    with pytest.raises(ValueError):
        il.to_wxyz(q, "zyxw")


def test_robotwin_action_drives_one_arm_and_holds_the_other():
    qpos = np.tile(np.r_[np.arange(7) * 0.1, 0.5, -np.arange(7) * 0.1, 1.0], (2, 1))
    a = np.array([[0.05] * 7 + [0.02], [0.0] * 7 + [0.08]])
    right = rt.to_robotwin_action(a, qpos, "right", gripper=True)
    np.testing.assert_allclose(right[:, :8], qpos[:, :8])  # left arm and gripper untouched
    np.testing.assert_allclose(right[0, 8:15], qpos[0, 8:15] + 0.05)
    np.testing.assert_allclose(right[:, 15], [0.25, 1.0])  # 2 cm of 8 -> 0.25 normalized
    left = rt.to_robotwin_action(a[:, :7], qpos, "left", gripper=False)
    np.testing.assert_allclose(left[0, :7], qpos[0, :7] + 0.05)
    np.testing.assert_allclose(left[:, 7:], qpos[:, 7:])


def test_robotwin_state_from_recorded_fr3(recorded):
    q = recorded["q"][:, :7]
    width = recorded["q"][:, 7] + recorded["q"][:, 8]
    n = len(q)
    qpos = np.concatenate(
        [np.zeros((n, 8)), q, (width / GRIPPER_MAX_WIDTH)[:, None]], axis=1
    )  # driven arm: right
    prev = qpos.copy()
    prev[:, 8:15] -= 0.01
    state = rt.robot_state(qpos, prev, dt=0.1, arm="right")
    ours = recorded["state"][:, :22]
    np.testing.assert_allclose(state[:, :7], ours[:, :7], atol=1e-6)
    np.testing.assert_allclose(state[:, 7:14], 0.1, atol=1e-6)  # finite difference over one tick
    np.testing.assert_allclose(state[:, 14:22], ours[:, 14:22], atol=2e-5)  # FK TCP == MuJoCo's tcp site
    np.testing.assert_allclose(rt.other_arm(qpos, "right"), np.zeros((n, 8)))


def test_robotwin_square_resize_centre_crops():
    img = np.zeros((240, 320, 3), np.uint8)
    img[:, 40:280] = 200  # the centre square
    out = rt.square_resize(img, 64)
    assert out.shape == (64, 64, 3) and out.dtype == np.uint8 and out.min() == 200
