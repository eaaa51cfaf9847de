"""RealRobotEnv over a real bridge (loopback ZeroMQ, in-memory arm): the batched env contract."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.bridge import KinematicArm
from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv, Settled
from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS
from rlinf_robot.errors import ConfigError, Latched, LinkLost
from rlinf_robot.protocol import Observation
from rlinf_robot.robot.franka.model import HOME_Q, tcp_pose

HOME_TCP = tcp_pose(HOME_Q)[:3]


@pytest.fixture
def env(server, make_client):
    goal = HOME_TCP + np.array([0.04, -0.03, -0.05])
    cfg = RealEnvConfig(
        action_mode="ee_delta",
        control_hz=10.0,
        task="fr3-reach",
        task_options={"goal": goal.tolist()},
        max_episode_steps=200,
        cameras={"front": (48, 64, 3)},
        auto_reset=False,
        start_from_task=False,
    )
    e = RealRobotEnv(make_client(server), cfg)
    yield e
    e.close()


def test_spec_matches_the_sim_layout(env):
    assert env.num_envs == 1 and env.action_spec.mode == "ee_delta" and env.action_spec.shape == (6,)
    assert env.obs_spec.state_fields[: len(ROBOT_STATE_FIELDS)] == ROBOT_STATE_FIELDS
    assert env.obs_spec.state_shape == (22 + 6,)


def test_reset_homes_and_a_p_controller_reaches_the_goal(env, arm):
    obs = env.reset(seed=0)
    assert obs["state"].shape == (1, 28) and obs["state"].dtype == np.float32
    assert obs["images"]["front"].shape == (1, 48, 64, 3) and obs["instruction"] == ["reach"]  # the robot's
    assert arm.entries("home")
    sl = env.obs_spec.state_slices()
    np.testing.assert_allclose(obs["state"][0, sl["tcp_pos"]], HOME_TCP, atol=1e-6)
    assert obs["state"][0, sl["tcp_quat"]] @ np.array([0, 1, 0, 0]) >= 0
    for _ in range(40):
        err = obs["state"][:, sl["goal_minus_tcp"]]
        action = np.concatenate([err * 2.0, np.zeros((1, 3))], axis=1)  # clipped to the step limit
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["rejections"] == [[]]
        if terminated[0]:
            break
    assert terminated[0] and info["success"][0] and reward[0] > 0.7
    assert np.linalg.norm(obs["state"][0, sl["goal_minus_tcp"]]) < 0.025
    assert info["latency_ms"]["step"][0] > 0 and "final_state" in info


def test_chunk_step_runs_h_actions_as_one_chunk(env, server):
    env.reset()
    before = server.status().counters.get("steps_applied", 0)
    chunk = np.zeros((1, 5, 6), np.float32)
    chunk[0, :, 2] = 0.005  # 5 x 5 mm up, one per 100 ms slot
    obs, _, _, _, info = env.chunk_step(chunk)
    sl = env.obs_spec.state_slices()
    assert obs["state"][0, sl["tcp_pos"]][2] == pytest.approx(HOME_TCP[2] + 0.025, abs=1e-4)
    assert server.status().counters["steps_applied"] - before == 5
    assert env.steps[0] == 5 and info["rejections"] == [[]]


def test_bad_actions_raise_before_anything_moves(env, arm):
    env.reset()
    n = len(arm.entries("apply"))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.full((1, 6), np.nan))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((2, 6)))
    assert len(arm.entries("apply")) == n


def test_e_stop_raises_latched(env, make_client, server):
    env.reset()
    make_client(server).command("stop")
    with pytest.raises(Latched):
        env.step(np.zeros((1, 6), np.float32))


def test_a_stale_camera_is_never_silently_reused(env, arm):
    env.reset()
    arm.stale = ["front"]
    arm.images = {}
    env.cfg.__dict__["step_timeout_s"] = 0.3  # frozen dataclass: shorten the wait for this test only
    with pytest.raises(LinkLost, match="front"):
        env.step(np.zeros((1, 6), np.float32))


def test_chunk_past_the_time_limit_is_cut_and_the_rest_never_reaches_the_arm(server, make_client, arm):
    """A 4-row chunk with 2 steps left in the episode: 2 rows are sent, the episode ends (truncated)
    with the arm where those 2 rows took it, and the arm never sees rows 2-3."""
    cfg = RealEnvConfig(
        action_mode="joint_delta",
        control_hz=20.0,
        max_episode_steps=6,
        auto_reset=False,
        start_from_task=False,
    )
    env = RealRobotEnv(make_client(server), cfg)
    try:
        env.reset(seed=0)
        q0 = np.array(arm.state().joint_pos)
        env.step(np.full((1, 7), 0.01, np.float32))
        env.step(np.full((1, 7), 0.01, np.float32))
        env.chunk_step(np.zeros((1, 2, 7), np.float32))  # 4 steps done, 2 left
        applied = len(arm.entries("apply"))
        chunk = np.zeros((1, 4, 7), np.float32)
        chunk[0, :, 0] = [0.01, 0.02, 0.04, 0.04]
        obs, reward, term, trunc, info = env.chunk_step(chunk)
        assert trunc[0] and not term[0] and info["executed"][0] == 2 and info["episode_length"][0] == 6
        assert len(arm.entries("apply")) - applied == 2
        q = arm.state().joint_pos
        np.testing.assert_allclose(q[0] - q0[0], 0.02 + 0.01 + 0.02, atol=1e-9)  # rows 0-1 only
        np.testing.assert_allclose(info["final_state"][0, :7], q, atol=1e-9)
    finally:
        env.close()


def test_chunk_rows_are_scored_on_their_trace(server, make_client, arm):
    """The reward of a chunk is the sum of each row's reward on the arm's state after that row (the
    bridge's trace), as the sims score it: a chunk that passes the goal and comes back scores the
    pass, not only where it ended."""
    goal = HOME_TCP + np.array([0.0, 0.0, 0.04])
    cfg = RealEnvConfig(
        action_mode="ee_delta",
        control_hz=10.0,
        task_options={"goal": goal.tolist()},
        max_episode_steps=50,
        auto_reset=False,
        terminate_on_success=False,
        start_from_task=False,
    )
    env = RealRobotEnv(make_client(server), cfg)
    try:
        env.reset(seed=0)
        chunk = np.zeros((1, 4, 6), np.float32)
        chunk[0, :, 2] = [0.02, 0.02, -0.02, -0.02]  # up 4 cm to the goal, then back down
        _, reward, *_, info = env.chunk_step(chunk)
        d = np.array([0.02, 0.0, 0.02, 0.04])  # distance to the goal after each row
        expected = np.sum(1.0 - np.tanh(10.0 * d))
        assert reward[0] == pytest.approx(expected, abs=0.02)
        assert info["chunk_report"][0]["rows"] == 4 and info["chunk_report"][0]["applied"] == 4
    finally:
        env.close()


def test_reset_starts_the_arm_where_the_sim_task_starts(server, make_client, arm):
    """Home, then the task's sampled start pose (READY_Q plus its noise), as the sim draws it."""
    from rlinf_robot.envs.tasks import READY_Q, make_task

    env = RealRobotEnv(make_client(server), RealEnvConfig(seed=3))
    try:
        obs = env.reset(seed=3)
        expected = make_task("fr3-reach").sample(np.random.default_rng(3))
        np.testing.assert_allclose(obs["state"][0, :7], expected.arm_q, atol=1e-6)
        assert np.max(np.abs(obs["state"][0, :7] - READY_Q)) <= 0.03 + 1e-6
        np.testing.assert_allclose(env.goals[0], expected.goal)
    finally:
        env.close()


def test_a_goal_seen_through_a_camera_is_measured_where_the_cells_camera_stands(server, make_client, arm):
    """The arm's episodes see a ``goal_camera`` goal from ``camera_poses``, the cell's camera (the
    sims from their scene's): R^T (goal - t) in that camera's frame, the goal itself nowhere."""
    from calibration.scene import CELL_CAMERAS

    pose = CELL_CAMERAS["front"]
    cfg = RealEnvConfig(seed=3, task_options={"goal_camera": "front"}, camera_poses={"front": pose.tolist()})
    env = RealRobotEnv(make_client(server), cfg)
    try:
        obs = env.reset(seed=3)
        assert env.obs_spec.state_fields[-1] == ("goal_in_front", 3) and obs["state"].shape == (1, 25)
        seen = obs["state"][0, -3:].astype(np.float64)
        np.testing.assert_allclose(pose[:3, :3] @ seen + pose[:3, 3], env.goals[0], atol=1e-5)
    finally:
        env.close()
    q = arm.observe().joint_pos.copy()
    with pytest.raises(
        ConfigError, match="no such camera"
    ):  # a cell without that camera: named, before any reset
        RealRobotEnv(make_client(server), RealEnvConfig(seed=3, task_options={"goal_camera": "front"}))
    np.testing.assert_array_equal(arm.observe().joint_pos, q)  # and nothing moved


@pytest.mark.parametrize(
    "pose", [np.eye(3).tolist(), (2 * np.eye(4)).tolist(), np.diag([1, 1, -1, 1]).tolist()]
)
def test_a_camera_pose_that_is_not_rigid_is_refused(pose):
    with pytest.raises(ConfigError, match="camera_poses.front must be a rigid 4x4"):
        RealEnvConfig(camera_poses={"front": pose})


def test_unknown_task_is_a_config_error(server, make_client):
    with pytest.raises(ConfigError, match="fr3-reach"):
        RealRobotEnv(make_client(server), RealEnvConfig(task="juggle"))


def _obs(t_s: float, q) -> Observation:
    return Observation(
        seq=1,
        stamp_ns=int(t_s * 1e9),
        joint_pos=np.asarray(q, np.float64),
        joint_vel=np.full(7, 0.08),
        ee_pose=np.r_[HOME_TCP, 0, 1, 0, 0],
    )


def test_settled_is_judged_from_positions_not_the_chattering_velocity_field():
    """franka-sim's joint 7 reports +-0.08 rad/s while it stands still within 1-2 mrad."""
    still = Settled(0.02)
    assert not still(_obs(0.0, HOME_Q))
    assert not still(_obs(0.1, HOME_Q + 1e-3))  # too short a window to judge
    assert still(_obs(0.3, HOME_Q + 2e-3))  # 2 mrad in 0.3 s: settled, whatever joint_vel says
    moving = Settled(0.02)
    moving(_obs(0.0, HOME_Q))
    assert not moving(_obs(0.3, HOME_Q + np.r_[0.05, np.zeros(6)]))  # 0.17 rad/s
    assert not moving(_obs(0.3, HOME_Q))  # the same capture again: no new information


def test_rows_the_arm_held_through_keep_the_state_before_them():
    """A refused row's trace is NaN: it is scored on the state before it (the chunk's start for the
    first row), never on NaN (a soak run's NaN reward made every learner weight NaN)."""
    from rlinf_robot.envs.real import row_states

    start, end = np.zeros(15), np.full(15, 9.0)
    trace = np.array([np.full(15, np.nan), np.ones(15), np.full(15, np.nan)])
    states = row_states(trace, 4, start, end)
    np.testing.assert_array_equal(states[:, 0], [0.0, 1.0, 1.0, 9.0])
    assert np.isfinite(row_states(np.full((2, 15), np.nan), 2, start, end)).all()
    np.testing.assert_array_equal(row_states(None, 2, start, end), np.full((2, 15), 9.0))


class _StateGaps(KinematicArm):
    """An arm whose state goes missing for the next ``gaps`` reads (a robot PC too busy to publish)."""

    gaps = 0

    def state(self):
        if self.gaps > 0:
            self.gaps -= 1
            return None
        return super().state()


def test_a_reset_move_refused_for_stale_state_is_tried_again(make_server, make_client):
    """The bridge holds the arm and answers ``no_state`` when its state goes stale mid-move (CI saw
    it under load): the reset moves again once the state is fresh; a state that never comes back
    fails the reset with that code after ``MOVE_ATTEMPTS`` moves, the arm never having moved on it."""
    from rlinf_robot.bridge.errors import CommandRefused
    from rlinf_robot.envs.real import MOVE_ATTEMPTS
    from rlinf_robot.envs.tasks import make_task

    arm = _StateGaps(images={"front": np.zeros((48, 64, 3), np.uint8)})
    server = make_server(arm)
    env = RealRobotEnv(make_client(server), RealEnvConfig(seed=3))
    try:
        arm.gaps = 1
        obs = env.reset(seed=3)
        expected = make_task("fr3-reach").sample(np.random.default_rng(3))
        np.testing.assert_allclose(obs["state"][0, :7], expected.arm_q, atol=1e-6)
        assert env.last_reset[0]["refused"] == 1 and env.last_reset[0]["moves"] == 2
        assert server.status().counters["steps_no_state"] == 1

        arm.gaps = 10**6
        applied = len(arm.entries("apply"))
        with pytest.raises(CommandRefused, match=f"{MOVE_ATTEMPTS} times") as e:
            env.reset(seed=4)
        assert e.value.code == "no_state" and len(arm.entries("apply")) == applied
    finally:
        env.close()
