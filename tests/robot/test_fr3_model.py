"""The FR3 model (``rlinf_robot.robot.franka.model``) against MuJoCo's own kinematics of the sim.

Our DH forward kinematics, its Jacobian and the IK built on them are what the safety filter, the
franka node, the bridge and calibration use; the MuJoCo model is what the sim trains on and what
franka-sim serves. Both must describe the same arm: TCP position, orientation and Jacobian are
compared with MuJoCo's ``tcp`` site (``site_xpos``, ``site_xmat``, ``mj_jacSite``) on random
configurations across the joint range. Everything else about the model's kinematics is tested
through this one comparison.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.robot.franka import model
from rlinf_robot.rotations import quat_angle, quat_from_matrix, quat_to_matrix
from rlinf_robot.safety import SafetyLimits

mujoco = pytest.importorskip("mujoco")

LIMITS = SafetyLimits.from_yaml()
#: fr3.xml writes the hand's -45 deg yaw as the quaternion (0.9238795, 0, 0, -0.3826834): 7 digits,
#: so MuJoCo's hand is turned ~3e-8 rad from the exact -pi/4 of the DH model. Positions (and so the
#: Jacobian) agree to rounding; orientations to this.
ROT_TOL = 1e-7


@pytest.fixture(scope="module")
def sim():
    """The training sim's compiled model (FR3 + hand + its ``tcp`` site) and the arm's qpos slots."""
    from sim.mujoco.scene import build_model

    m = build_model("reach.xml")
    d = mujoco.MjData(m)
    joints = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in model.JOINT_NAMES]
    assert min(joints) >= 0, "the sim model lacks a joint named in model.JOINT_NAMES"
    site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "tcp")
    return m, d, m.jnt_qposadr[joints], m.jnt_dofadr[joints], site


def random_q(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(LIMITS.q_lo, LIMITS.q_hi, (n, 7))


def mujoco_tcp(sim, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's TCP pose (4x4) and 6x7 site Jacobian (linear rows, then angular) at ``q``."""
    m, d, qpos_adr, dof_adr, site = sim
    d.qpos[:] = 0.0
    d.qpos[qpos_adr] = q
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    t = np.eye(4)
    t[:3, :3] = d.site_xmat[site].reshape(3, 3)
    t[:3, 3] = d.site_xpos[site]
    jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    mujoco.mj_jacSite(m, d, jp, jr, site)
    return t, np.concatenate([jp[:, dof_adr], jr[:, dof_adr]])


def test_fk_position_and_orientation_match_mujoco(sim):
    qs = random_q(200, seed=0)
    ours = model.forward_kinematics(qs)  # batched
    for q, t in zip(qs, ours, strict=True):
        t_mj, _ = mujoco_tcp(sim, q)
        np.testing.assert_allclose(t[:3, 3], t_mj[:3, 3], atol=1e-12)
        np.testing.assert_allclose(t[:3, :3], t_mj[:3, :3], atol=ROT_TOL)
        np.testing.assert_allclose(model.forward_kinematics(q), t, atol=1e-12)  # single == batched


def test_tcp_pose_quaternion_is_the_fk_rotation(sim):
    qs = random_q(50, seed=1)
    poses = model.tcp_pose(qs)
    for q, pose in zip(qs, poses, strict=True):
        t_mj, _ = mujoco_tcp(sim, q)
        np.testing.assert_allclose(pose[:3], t_mj[:3, 3], atol=1e-12)
        np.testing.assert_allclose(quat_to_matrix(pose[3:]), t_mj[:3, :3], atol=ROT_TOL)
        assert pose[3] >= 0.0
    np.testing.assert_allclose(model.tcp_position(qs), poses[:, :3], atol=1e-12)


def test_jacobian_matches_mj_jacsite(sim):
    qs = random_q(200, seed=2)
    jacs, ts = model.jacobian(qs)
    np.testing.assert_allclose(ts, model.forward_kinematics(qs), atol=1e-12)
    for q, jac in zip(qs, jacs, strict=True):
        _, jac_mj = mujoco_tcp(sim, q)
        np.testing.assert_allclose(jac, jac_mj, atol=1e-12)


def test_the_sim_model_carries_the_models_facts(sim):
    """Joint ranges are the safety limits' datasheet values; the fingers open to GRIPPER_MAX_WIDTH."""
    m = sim[0]
    ranges = np.array(
        [m.jnt_range[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)] for n in model.JOINT_NAMES]
    )
    np.testing.assert_allclose(ranges[:, 0], LIMITS.joint_position_min, atol=1e-4)
    np.testing.assert_allclose(ranges[:, 1], LIMITS.joint_position_max, atol=1e-4)
    finger = m.jnt_range[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "finger_joint1")]
    assert 2 * finger[1] == pytest.approx(model.GRIPPER_MAX_WIDTH)
    assert np.all((model.HOME_Q > LIMITS.q_lo) & (model.HOME_Q < LIMITS.q_hi))


@pytest.mark.parametrize("seed", range(5))
def test_ik_round_trip_near_the_start(sim, seed):
    """FK of a configuration near home, then IK from home: back on the same pose (checked in MuJoCo)."""
    rng = np.random.default_rng(seed)
    q_true = model.HOME_Q + rng.normal(0, 0.15, 7)
    result = model.solve_ik(model.tcp_pose(q_true), model.HOME_Q)
    assert result.converged and result.position_error < 1e-5 and result.rotation_error < 1e-4
    t_true, _ = mujoco_tcp(sim, q_true)
    t_ik, _ = mujoco_tcp(sim, result.q)
    assert np.linalg.norm(t_ik[:3, 3] - t_true[:3, 3]) < 1e-5
    assert np.linalg.norm(model.pose_error(t_true, t_ik)[3:]) < 1e-4


def test_ik_far_targets_with_bounds_and_step_cap():
    """A far target (calibration's use): joint bounds hold at every step, the answer reaches it."""
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(10):
        q_true = np.clip(model.HOME_Q + rng.uniform(-0.6, 0.6, 7), LIMITS.q_lo, LIMITS.q_hi)
        r = model.solve_ik(
            model.forward_kinematics(q_true),
            model.HOME_Q,
            q_lo=LIMITS.q_lo,
            q_hi=LIMITS.q_hi,
            damping=1e-2,
            max_step=0.2,
            max_iter=200,
        )
        assert np.all(r.q >= LIMITS.q_lo) and np.all(r.q <= LIMITS.q_hi)
        if r.converged:
            hits += 1
            reached = model.tcp_pose(r.q)
            assert np.linalg.norm(reached[:3] - model.tcp_pose(q_true)[:3]) < 1e-5
            assert quat_angle(reached[3:], model.tcp_pose(q_true)[3:]) < 1e-4
    assert hits >= 8


def test_ik_reports_an_unreachable_target():
    target = model.forward_kinematics(model.HOME_Q)
    target[:3, 3] = [2.0, 0.0, 0.5]  # 2 m out: past the arm's reach
    r = model.solve_ik(target, model.HOME_Q, max_iter=30)
    assert not r.converged and r.position_error > 0.5 and r.iterations == 30


def test_pose_error_and_dls_step_are_batched():
    qs = random_q(4, seed=3)
    jac, t = model.jacobian(qs)
    target = model.forward_kinematics(qs + 1e-3)
    err = model.pose_error(target, t)
    assert err.shape == (4, 6)
    dq = model.dls_step(jac, err, 1e-3)
    assert dq.shape == (4, 7)
    after = model.pose_error(target, model.forward_kinematics(qs + dq))  # one step: error to 2nd order
    assert np.all(np.linalg.norm(after, axis=1) < 1e-2 * np.linalg.norm(err, axis=1))


def test_one_matrix_converts_as_a_batch_does():
    """``quat_from_matrix`` of one matrix (plain floats) and of a batch (numpy) agree, also at
    180 deg turns and on ties between the candidates, and the one-config FK is the batched one."""
    rng = np.random.default_rng(0)
    q = rng.normal(size=(500, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    mats = np.concatenate(
        [
            quat_to_matrix(q),
            np.stack([np.eye(3), np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1]), np.diag([-1.0, -1, 1])]),
            quat_to_matrix(np.array([[0.5, 0.5, 0.5, 0.5], [0.0, 0.6, 0.8, 0.0]])),
        ]
    )
    batch = quat_from_matrix(mats)
    ones = np.stack([quat_from_matrix(m) for m in mats])
    assert np.abs(batch - ones).max() < 1e-12
    assert np.all(ones[:, 0] >= 0)
    qs = rng.uniform(-1.5, 1.5, size=(20, 7))
    assert (
        np.abs(np.stack([model.forward_kinematics(x) for x in qs]) - model.forward_kinematics(qs)).max()
        < 1e-12
    )
