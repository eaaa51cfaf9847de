"""MultiTaskEnv over the embedded MuJoCo tasks: one batch, each part scoring its own episodes, the
state cut to the robot's proprioception, and the multi-task expert solving every part."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from rlinf_robot.envs.multitask import MultiTaskEnv
from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS
from sim.mujoco.experts import multitask_expert

TASKS = ("mujoco/fr3-reach", "mujoco/fr3-push", "mujoco/fr3-lift")
OPTS = dict(action_mode="ee_delta", control_hz=10.0, gripper=True, terminate_on_success=False)


def _env(n=2, **extra):
    return MultiTaskEnv([sim.make(t, num_envs=n, **OPTS, **extra) for t in TASKS])


def test_joins_parts_and_keeps_only_shared_state():
    env = _env(2, image_size=32)
    try:
        obs = env.reset(seed=3)
        width = sum(w for _, w in ROBOT_STATE_FIELDS)
        assert env.num_envs == 6 and env.obs_spec.state_shape == (width,)
        assert obs["state"].shape == (6, width)
        assert obs["images"]["front"].shape == (6, 32, 32, 3)
        assert obs["instruction"][0] != obs["instruction"][2] != obs["instruction"][4]
        assert list(env.task_of()) == [0, 0, 1, 1, 2, 2]
        # the parts' full observations keep the task columns (goal, block) for the experts
        assert env.part_obs[1]["state"].shape[1] > width
        np.testing.assert_array_equal(obs["state"][2:4], env.part_obs[1]["state"][:, :width])
        known = env.privileged()  # the task columns the joint state leaves out, NaN-padded
        assert known.shape == (6, env.privileged_width) and env.privileged_width == 13
        np.testing.assert_array_equal(known[2:4, :12], env.part_obs[1]["state"][:, width:])
        assert (
            np.isnan(known[:2, 6:]).all()
            and np.isnan(known[2:4, 12:]).all()
            and not np.isnan(known[4:]).any()
        )
        again = env.reset(seed=3)
        np.testing.assert_array_equal(again["state"], obs["state"])
    finally:
        env.close()


def test_each_part_keeps_its_own_time_limit_and_the_expert_solves_all():
    env = _env(2)
    try:
        expert = multitask_expert(env)
        obs = env.reset(seed=0)
        limits = [p.max_episode_steps for p in env.parts]
        assert len(set(limits)) == 3  # reach, push and lift run for different lengths
        ended = {i: [] for i in range(3)}
        for t in range(max(limits)):
            obs, reward, term, trunc, info = env.step(expert(obs))
            assert reward.shape == (6,) and info["success"].shape == (6,)
            done = term | trunc
            if done.any():
                assert info["final_state"].shape == (6, env.width)
            for i in np.flatnonzero(done):
                ended[env.task_of()[i]].append((t + 1, bool(info["success"][i])))
        for part, limit in enumerate(limits):
            ends = sorted({t for t, _ in ended[part]})
            assert ends == list(range(limit, max(limits) + 1, limit)), (part, ended[part])  # 2 envs each
            assert all(ok for _, ok in ended[part]), (TASKS[part], ended[part])
    finally:
        env.close()


def test_refuses_parts_that_act_differently():
    a = sim.make(TASKS[0], num_envs=1, **OPTS)
    b = sim.make(TASKS[1], num_envs=1, **{**OPTS, "control_hz": 20.0})
    try:
        with pytest.raises(ValueError, match="act alike"):
            MultiTaskEnv([a, b])
    finally:
        a.close()
        b.close()
    env = _env(1)
    try:
        env.reset(seed=0)
        bad = np.zeros((3, 1, 7), np.float32)
        bad[1, 0, 0] = np.nan
        before = [p.steps.copy() for p in env.parts]
        with pytest.raises(ValueError, match="NaN"):
            env.chunk_step(bad)
        assert all((p.steps == s).all() for p, s in zip(env.parts, before, strict=True))  # nothing moved
    finally:
        env.close()
