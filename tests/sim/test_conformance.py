"""The batched env contract, checked on every registered env that runs on this machine's CPU.

Each case is (env name, options). Every CPU env is covered with its defaults; the MuJoCo envs also
in their other modes (joint_delta, images, domain randomization) because those change code paths.
"""

from __future__ import annotations

import numpy as np
import pytest

import sim

CPU_ENVS = sim.names(device="cpu", available_only=True)
# ManiSkill's ee_delta controller solves IK with pytorch_kinematics on every step (~70 steps/s here):
# push-cube covers it with defaults, the other ManiSkill tasks run in joint_delta (~3x faster).
CASES = [
    (
        name,
        {"action_mode": "joint_delta"}
        if name.startswith("maniskill/") and name != "maniskill/push-cube"
        else {},
    )
    for name in CPU_ENVS
] + [
    ("mujoco/fr3-reach", {"action_mode": "joint_delta"}),
    ("mujoco/fr3-reach", {"image_size": 64}),
    ("mujoco/fr3-lift", {"randomization": True}),
]
N = 2


def _id(case):
    name, opts = case
    return name + "".join(f"[{k}={v}]" for k, v in opts.items())


@pytest.fixture(params=CASES, ids=[_id(c) for c in CASES])
def case(request):
    return request.param


def make(case, num_envs=N, **extra):
    name, opts = case
    return sim.make(name, num_envs=num_envs, **{**opts, **extra})


def random_actions(env, rng, steps):
    spec = env.action_spec
    return rng.uniform(spec.low, spec.high, (steps, env.num_envs, *spec.shape)).astype(np.float32)


def check_obs(env, obs):
    n = env.num_envs
    assert set(obs) == {"state", "images", "instruction"}
    state = obs["state"]
    assert state.dtype == np.float32 and state.shape == (n, *env.obs_spec.state_shape)
    assert np.all(np.isfinite(state))
    assert set(obs["images"]) == set(env.obs_spec.images)
    for cam, hwc in env.obs_spec.images.items():
        img = obs["images"][cam]
        assert img.dtype == np.uint8 and img.shape == (n, *hwc)
        assert img.std() > 5, f"camera {cam} rendered a flat image"
    assert isinstance(obs["instruction"], list) and len(obs["instruction"]) == n
    assert all(isinstance(s, str) and s for s in obs["instruction"])


def test_specs_and_shapes(case):
    env = make(case)
    try:
        spec = env.action_spec
        assert spec.mode in ("joint_delta", "ee_delta") and spec.control_hz > 0
        assert spec.low.dtype == spec.high.dtype == np.float32 and np.all(spec.low < spec.high)
        if env.obs_spec.state_fields:
            assert sum(w for _, w in env.obs_spec.state_fields) == env.obs_spec.state_shape[0]
            assert [f for f, _ in env.obs_spec.state_fields[:5]] == [
                "joint_pos",
                "joint_vel",
                "tcp_pos",
                "tcp_quat",
                "gripper_width",
            ]
        check_obs(env, env.reset(seed=0))
        rng = np.random.default_rng(0)
        for a in random_actions(env, rng, 3):
            obs, reward, term, trunc, info = env.step(a)
            check_obs(env, obs)
            assert reward.dtype == np.float32 and reward.shape == (N,) and np.all(np.isfinite(reward))
            assert term.dtype == bool and trunc.dtype == bool and term.shape == trunc.shape == (N,)
            assert isinstance(info, dict) and info["success"].shape == (N,)
    finally:
        env.close()


def test_seeding_is_deterministic(case):
    a, b, c = make(case), make(case), make(case)
    try:
        oa, ob, oc = a.reset(seed=7), b.reset(seed=7), c.reset(seed=8)
        np.testing.assert_array_equal(oa["state"], ob["state"])
        assert not np.array_equal(oa["state"], oc["state"])
        for act in random_actions(a, np.random.default_rng(1), 6):
            ra, rb = a.step(act), b.step(act)
            np.testing.assert_array_equal(ra[0]["state"], rb[0]["state"])
            np.testing.assert_array_equal(ra[1], rb[1])
            for cam in ra[0]["images"]:
                np.testing.assert_array_equal(ra[0]["images"][cam], rb[0]["images"][cam])
    finally:
        for e in (a, b, c):
            e.close()


def test_reset_after_done(case):
    env = make(case, max_episode_steps=3)
    try:
        env.reset(seed=3)
        hold = np.zeros((N, *env.action_spec.shape), np.float32)
        if env.action_spec.gripper:
            hold[:, -1] = env.action_spec.high[-1]
        dones = []
        for _ in range(6):
            obs, _, term, trunc, info = env.step(hold)
            check_obs(env, obs)
            dones.append(term | trunc)
            if (term | trunc).any():
                assert info["final_state"].shape == obs["state"].shape
        # Holding still never succeeds, so every episode is cut at exactly 3 steps, twice.
        assert [bool(d.all()) for d in dones] == [False, False, True, False, False, True]
    finally:
        env.close()


def test_chunk_step_equals_h_steps(case):
    """Within an episode a chunk is its rows, one control period each."""
    a, b = make(case), make(case)
    try:
        a.reset(seed=5)
        b.reset(seed=5)
        chunk = random_actions(a, np.random.default_rng(2), 4).transpose(1, 0, 2)  # [N, H, A]
        obs_a, rew_a, term_a, trunc_a, info = a.chunk_step(chunk)
        total = np.zeros(N, np.float32)
        for h in range(chunk.shape[1]):
            obs_b, r, te, tr, _ = b.step(chunk[:, h])
            total += r
            assert not (te | tr).any(), "the test's episodes must outlast the chunk"
        np.testing.assert_array_equal(obs_a["state"], obs_b["state"])
        np.testing.assert_allclose(rew_a, total, rtol=1e-6)
        np.testing.assert_array_equal(info["executed"], [4] * N)
    finally:
        a.close()
        b.close()


def test_chunk_step_stops_at_the_episode_end(case):
    """2-step episodes, a 4-row chunk: each env runs rows 0-1, reports the end of its episode with
    the state that ended it, never executes rows 2-3, and starts its next episode afresh after the
    chunk. (The old loop ran rows 2-3 as a second, unreported episode.)"""
    a, b = make(case, max_episode_steps=2), make(case, max_episode_steps=2)
    try:
        a.reset(seed=11)
        b.reset(seed=11)
        chunk = random_actions(a, np.random.default_rng(4), 4).transpose(1, 0, 2)
        obs_a, rew_a, term_a, trunc_a, info_a = a.chunk_step(chunk)
        _, r0, *_ = b.step(chunk[:, 0])
        obs_b, r1, term_b, trunc_b, info_b = b.step(chunk[:, 1])
        assert (term_b | trunc_b).all()
        np.testing.assert_array_equal(term_a, term_b)
        np.testing.assert_array_equal(trunc_a, trunc_b)
        np.testing.assert_array_equal(info_a["executed"], [2] * N)
        np.testing.assert_allclose(rew_a, r0 + r1, rtol=1e-6)
        np.testing.assert_array_equal(info_a["final_state"], info_b["final_state"])
        np.testing.assert_array_equal(info_a["episode_length"], [2] * N)
        np.testing.assert_array_equal(obs_a["state"], obs_b["state"])  # the next episode's start
        np.testing.assert_array_equal(a.steps, [0] * N)
    finally:
        a.close()
        b.close()


def test_bad_actions_are_refused_without_effect(case):
    a, b = make(case), make(case)
    try:
        a.reset(seed=9)
        b.reset(seed=9)
        good = random_actions(a, np.random.default_rng(3), 1)[0]
        bad = good.copy()
        bad[0, 0] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            a.step(bad)
        with pytest.raises(ValueError, match="shape"):
            a.step(good[:, :-1])
        ra, rb = a.step(good), b.step(good)
        np.testing.assert_array_equal(ra[0]["state"], rb[0]["state"])
    finally:
        a.close()
        b.close()
