"""The training sim's cameras placed where calibration found the real ones: a hand-eye pose (OpenCV
axes, in the TCP frame for the wrist camera, the base frame for the front one) and the field of
view of the intrinsics, checked against MuJoCo's own kinematics of the placed camera."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from calibration.scene import DEFAULT_CAM_IN_BASE, DEFAULT_CAM_IN_TCP, CameraSpec
from calibration.session import camera_poses_from_records
from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.mjcf import CV_TO_MJ
from tests.support.calibration_records import camera_records


def _camera_in_world(env, name: str) -> np.ndarray:
    import mujoco

    m, d = env.models[0], env.datas[0]
    mujoco.mj_forward(m, d)
    i = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, name)
    t = np.eye(4)
    t[:3, :3] = d.cam_xmat[i].reshape(3, 3) @ CV_TO_MJ  # back to OpenCV axes
    t[:3, 3] = d.cam_xpos[i]
    return t


def _tcp_in_world(env) -> np.ndarray:
    import mujoco

    m, d = env.models[0], env.datas[0]
    i = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "tcp")
    t = np.eye(4)
    t[:3, :3] = d.site_xmat[i].reshape(3, 3)
    t[:3, 3] = d.site_xpos[i]
    return t


@pytest.mark.parametrize(
    "mode, camera, truth",
    [("eye_in_hand", "wrist", DEFAULT_CAM_IN_TCP), ("eye_to_hand", "front", DEFAULT_CAM_IN_BASE)],
)
def test_a_camera_sits_where_its_hand_eye_record_says_with_its_field_of_view(mode, camera, truth):
    spec = CameraSpec(fovy_deg=55.0)
    poses = camera_poses_from_records(*camera_records(mode, truth, spec))
    assert list(poses) == [camera] and poses[camera]["fovy"] == pytest.approx(55.0)
    env = sim.make("mujoco/fr3-reach", 1, camera_poses=poses, image_size=32, seed=0)
    try:
        obs = env.reset(seed=0)
        frame = _tcp_in_world(env) if camera == "wrist" else np.eye(4)  # the base is the world origin
        placed = _camera_in_world(env, camera)
        expected = frame @ truth
        np.testing.assert_allclose(placed[:3, 3], expected[:3, 3], atol=1e-9)
        np.testing.assert_allclose(placed[:3, :3], expected[:3, :3], atol=1e-9)
        i = env.models[0].camera(camera).id
        assert env.models[0].cam_fovy[i] == pytest.approx(55.0)
        assert obs["images"][camera].shape == (1, 32, 32, 3)
    finally:
        env.close()


def test_the_scene_keeps_its_own_cameras_without_calibration():
    env = sim.make("mujoco/fr3-reach", 1, seed=0)
    try:
        env.reset(seed=0)
        placed = _camera_in_world(env, "front")
        assert np.linalg.norm(placed[:3, 3] - np.array([1.25, -0.75, 0.75])) < 1e-9
    finally:
        env.close()


@pytest.mark.parametrize(
    "poses, match",
    [
        ({"side": {"pose": np.eye(4).tolist()}}, "unknown camera 'side'"),
        ({"wrist": {"pose": [[1, 0], [0, 1]]}}, "camera_poses.wrist.pose must be a rigid"),
        ({"wrist": {"pose": (2 * np.eye(4)).tolist()}}, "camera_poses.wrist.pose must be a rigid"),
        ({"wrist": {}}, "camera_poses.wrist needs a 4x4 'pose'"),
        (
            {"wrist": {"pose": np.eye(4).tolist(), "fovy": 200}},
            r"camera_poses.wrist.fovy must be in \(0, 180\)",
        ),
    ],
)
def test_bad_camera_poses_name_the_camera(poses, match):
    with pytest.raises(ConfigError, match=match):
        sim.make("mujoco/fr3-reach", 1, camera_poses=poses)


def test_a_goal_seen_through_the_front_camera_is_measured_from_where_the_sim_placed_it():
    """``fr3-reach`` with ``goal_camera``: the goal column is the goal in that camera's frame, from
    the camera the sim renders (the nominal scene's, or the calibrated placement), so the same goal
    reads differently in the two sims; the scripted expert, mapping it back through its own sim's
    camera, reaches it in both."""
    from sim.mujoco.experts import reach

    spec = CameraSpec(fovy_deg=55.0)
    calibrated = camera_poses_from_records(*camera_records("eye_to_hand", DEFAULT_CAM_IN_BASE, spec))
    seen = {}
    for name, poses in (("nominal", {}), ("calibrated", calibrated)):
        env = sim.make(
            "mujoco/fr3-reach", 4, camera_poses=poses, task_options={"goal_camera": "front"}, seed=0
        )
        try:
            obs = env.reset(seed=0)
            assert env.obs_spec.state_fields[-1] == ("goal_in_front", 3)
            camera = _camera_in_world(env, "front")
            np.testing.assert_allclose(env.camera_poses["front"], camera, atol=1e-9)
            column = obs["state"][:, -3:].astype(np.float64)
            np.testing.assert_allclose(column, (env.goal - camera[:3, 3]) @ camera[:3, :3], atol=1e-5)
            seen[name] = column
            succeeded = np.zeros(4, bool)
            for _ in range(env.max_episode_steps):
                obs, _, _, _, info = env.step(reach(env, obs))
                succeeded |= info["success"]
            assert np.all(succeeded), f"{name}: the expert missed through its own camera"
        finally:
            env.close()
    assert np.min(np.linalg.norm(seen["nominal"] - seen["calibrated"], axis=1)) > 0.1


def test_a_goal_camera_the_scene_lacks_is_named():
    env = sim.make("mujoco/fr3-reach", 1, task_options={"goal_camera": "side"}, seed=0)
    try:
        with pytest.raises(ConfigError, match="camera 'side'.*no such camera"):
            env.reset(seed=0)
    finally:
        env.close()
