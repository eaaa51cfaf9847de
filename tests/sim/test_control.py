"""Sim actions mean what they mean on the arm: the bridge's delta rule, and the simulated arm follows."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from rlinf_robot.rotations import quat_conjugate, quat_multiply
from rlinf_robot.safety.deltas import DeltaRule


@pytest.mark.parametrize("mode", ["joint_delta", "ee_delta"])
def test_the_sim_commands_exactly_the_bridges_targets(mode):
    """The MuJoCo env's joint targets for a chunk are ``DeltaRule.plan`` from the last commanded
    target - the computation the bridge server runs for the arm."""
    env = sim.make("mujoco/fr3-reach", num_envs=3, action_mode=mode)
    try:
        env.reset(seed=1)
        rule = DeltaRule(mode, False, env.action_spec.control_hz)
        rows = np.random.default_rng(0).uniform(
            env.action_spec.low, env.action_spec.high, (3, 5, env.action_spec.shape[0])
        )
        anchor = rule.anchor(env._targets.copy(), env._batch.q.copy())
        expected = rule.plan(anchor, rows).targets
        for h in range(5):
            env.step(rows[:, h].astype(np.float32))
            np.testing.assert_allclose(env._targets, expected[:, h], atol=1e-5)  # float32 actions
    finally:
        env.close()


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
