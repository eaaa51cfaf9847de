"""Ground truth for camera calibration: the FR3 in MuJoCo with a textured ChArUco board and cameras
at known poses.

Everything a calibration should recover is known exactly here: the pinhole intrinsics follow from
the render size and field of view, the wrist camera's pose in the TCP frame and the fixed
camera's pose in the base frame are set when the scene is built, and the board sits in the world
(eye-in-hand) or on the hand (eye-to-hand). Rendering at robot poses then produces the images a
real calibration session would, optionally with pixel noise.

Frames: poses are 4x4 transforms ``T_a_b`` (b expressed in a). Cameras use OpenCV's frame (z
forward, y down); MuJoCo's camera frame (z backward, y up) differs by diag(1, -1, -1). Only the
board is drawn (the arm's geoms are hidden), so nothing occludes it and a frame costs ~0.1 s on
OSMesa at 640x480.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.charuco import BoardSpec, _cv2
from rlinf_robot.robot.franka.mjcf import CV_TO_MJ, load_fr3_spec
from rlinf_robot.robot.franka.model import JOINT_NAMES, TCP_OFFSET, forward_kinematics
from rlinf_robot.rotations import quat_from_matrix, rotvec_to_matrix

BOARD_GROUP = 0


def pose(rotation: np.ndarray | None = None, translation=(0.0, 0.0, 0.0)) -> np.ndarray:
    t = np.eye(4)
    if rotation is not None:
        t[:3, :3] = rotation
    t[:3, 3] = translation
    return t


def rot(axis, angle_deg: float) -> np.ndarray:
    """Rotation matrix about ``axis`` by ``angle_deg``."""
    a = np.asarray(axis, dtype=np.float64)
    return rotvec_to_matrix(a / np.linalg.norm(a) * np.deg2rad(angle_deg))


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """OpenCV camera pose at ``eye`` looking at ``target`` (image up roughly along ``up``)."""
    z = np.asarray(target, float) - np.asarray(eye, float)
    z /= np.linalg.norm(z)
    x = np.cross(z, -np.asarray(up, float))
    if np.linalg.norm(x) < 1e-6:
        x = np.cross(z, [0.0, 1.0, 0.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return pose(np.stack([x, y, z], axis=1), eye)


@dataclass(frozen=True)
class CameraSpec:
    width: int = 640
    height: int = 480
    fovy_deg: float = 55.0

    @property
    def focal(self) -> float:
        return (self.height / 2) / np.tan(np.deg2rad(self.fovy_deg) / 2)

    def matrix(self) -> np.ndarray:
        """The true pinhole matrix. MuJoCo's principal point is the image centre in continuous
        coordinates; OpenCV puts pixel centres on integers, hence the -0.5."""
        f = self.focal
        return np.array([[f, 0, (self.width - 1) / 2], [0, f, (self.height - 1) / 2], [0, 0, 1.0]])


#: Board lying face-up on the table in front of the robot (board z points down into the table).
DEFAULT_BOARD_IN_BASE = pose(np.diag([1.0, -1.0, -1.0]), (0.55 - 0.14, 0.10, 0.0))
#: Wrist camera: beside the hand, 6 cm off the TCP axis and 9 cm behind the fingertips, rotated
#: 90 deg about the axis and tilted 8 deg towards it - an arbitrary but realistic mount.
DEFAULT_CAM_IN_TCP = pose(rot([0, 0, 1], 90) @ rot([1, 0, 0], -8), (0.06, 0.01, -0.09))
#: Fixed camera: above and in front of the workspace, 0.65 m from its centre, looking down at it.
DEFAULT_CAM_IN_BASE = look_at((0.85, 0.3, 0.75), (0.5, 0.0, 0.3))
#: The embedded default's cell: the cameras fixed in its base frame, by the name the training sim
#: gives them (``sim.mujoco.scene``). The arm's episodes measure through these
#: (``RealEnvConfig.camera_poses``, set from here by ``${cell_camera:front}`` in
#: ``conf/robot/sim_local.yaml``); the nominal sim's front camera stands elsewhere until hand-eye
#: calibration places it.
CELL_CAMERAS = {"front": DEFAULT_CAM_IN_BASE}
#: Board held by the hand for eye-to-hand: a plate at the fingertips, facing back along the TCP
#: axis (up when the gripper points down), tilted 15 deg.
DEFAULT_BOARD_IN_TCP = pose(rot([1, 0, 0], 15), (-0.14, -0.10, 0.02))


class CalibrationScene:
    """The FR3, one ChArUco board, a wrist camera, a fixed camera and a free camera."""

    def __init__(
        self,
        board: BoardSpec | None = None,
        camera: CameraSpec = CameraSpec(),
        board_on_hand: bool = False,
        cam_in_tcp: np.ndarray = DEFAULT_CAM_IN_TCP,
        cam_in_base: np.ndarray = DEFAULT_CAM_IN_BASE,
        board_pose: np.ndarray | None = None,
        build_dir: Path | None = None,
    ):
        import mujoco

        self._mj = mujoco
        self.board, self.camera = board or BoardSpec(), camera
        self.board_on_hand = board_on_hand
        self.cam_in_tcp = np.asarray(cam_in_tcp, dtype=np.float64)
        self.cam_in_base = np.asarray(cam_in_base, dtype=np.float64)
        default = DEFAULT_BOARD_IN_TCP if board_on_hand else DEFAULT_BOARD_IN_BASE
        self.board_pose = np.asarray(default if board_pose is None else board_pose, dtype=np.float64)
        self._tmp = None
        if build_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="rlinf-calib-scene-")
            build_dir = Path(self._tmp.name)
        self.model = self._build(Path(build_dir))
        self.data = mujoco.MjData(self.model)
        self._arm = np.array(
            [
                self.model.jnt_qposadr[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, j)]
                for j in JOINT_NAMES
            ]
        )
        self._renderer = None
        self._option = mujoco.MjvOption()
        for g in range(1, 6):
            self._option.geomgroup[g] = 0  # draw the board only

    # --------------------------------------------------------------- build
    def _build(self, build_dir: Path):
        mj, cv2 = self._mj, _cv2()
        build_dir.mkdir(parents=True, exist_ok=True)
        tex = build_dir / "charuco_board.png"
        cv2.imwrite(str(tex), cv2.cvtColor(self.board.image(200), cv2.COLOR_GRAY2BGR))
        spec = load_fr3_spec()
        spec.visual.global_.offwidth = max(self.camera.width, 640)
        spec.visual.global_.offheight = max(self.camera.height, 480)
        spec.visual.headlight.ambient = [0.75, 0.75, 0.75]
        spec.visual.headlight.diffuse = [0.25, 0.25, 0.25]
        spec.visual.headlight.specular = [0.0, 0.0, 0.0]
        # A grey gradient behind everything, so the board's black border squares stand out.
        spec.add_texture(
            name="sky",
            type=mj.mjtTexture.mjTEXTURE_SKYBOX,
            builtin=mj.mjtBuiltin.mjBUILTIN_GRADIENT,
            rgb1=[0.62, 0.62, 0.6],
            rgb2=[0.38, 0.38, 0.4],
            width=64,
            height=64,
        )
        spec.add_texture(name="charuco", type=mj.mjtTexture.mjTEXTURE_2D, file=str(tex))
        mat = spec.add_material(
            name="charuco", texrepeat=[1, 1], texuniform=False, specular=0.0, shininess=0.0
        )
        mat.textures[mj.mjtTextureRole.mjTEXROLE_RGB] = "charuco"
        sx, sy = self.board.size_m
        # The texture spans the plane once: image column -> +x, image row -> -y, image top-left at
        # (-sx/2, +sy/2). So the OpenCV board frame sits at that corner with y and z flipped.
        geom_in_board = np.linalg.inv(pose(np.diag([1.0, -1.0, -1.0]), (-sx / 2, sy / 2, 0.0)))
        hand_in_tcp = pose(None, (0.0, 0.0, -TCP_OFFSET))  # hand body = TCP shifted back along z
        if self.board_on_hand:
            parent, t_geom = spec.body("hand"), np.linalg.inv(hand_in_tcp) @ self.board_pose @ geom_in_board
        else:
            parent, t_geom = spec.worldbody, self.board_pose @ geom_in_board
        parent.add_geom(
            name="charuco",
            type=mj.mjtGeom.mjGEOM_BOX,
            size=[sx / 2, sy / 2, 0.0005],
            pos=t_geom[:3, 3],
            quat=_quat(t_geom[:3, :3]),
            material="charuco",
            contype=0,
            conaffinity=0,
            group=BOARD_GROUP,
            mass=0.0,
        )
        fovy = self.camera.fovy_deg
        wrist = np.linalg.inv(hand_in_tcp) @ self.cam_in_tcp
        spec.body("hand").add_camera(
            name="wrist", pos=wrist[:3, 3], quat=_quat(wrist[:3, :3] @ CV_TO_MJ), fovy=fovy
        )
        spec.worldbody.add_camera(
            name="fixed",
            pos=self.cam_in_base[:3, 3],
            quat=_quat(self.cam_in_base[:3, :3] @ CV_TO_MJ),
            fovy=fovy,
        )
        spec.worldbody.add_camera(name="free", pos=[1, 0, 1], fovy=fovy)
        for geom in spec.geoms:
            if geom.name != "charuco" and geom.group == BOARD_GROUP:
                geom.group = 3
        return spec.compile()

    # -------------------------------------------------------------- truth
    def board_in_base(self, q: np.ndarray | None = None) -> np.ndarray:
        if not self.board_on_hand:
            return self.board_pose.copy()
        return self.tcp_in_base(q) @ self.board_pose

    @staticmethod
    def tcp_in_base(q: np.ndarray) -> np.ndarray:
        return forward_kinematics(q)

    # ------------------------------------------------------------- render
    def set_joints(self, q: np.ndarray) -> None:
        self.data.qpos[:] = 0.0
        self.data.qpos[self._arm] = q
        self._mj.mj_kinematics(self.model, self.data)
        self._mj.mj_camlight(self.model, self.data)

    def place_free_camera(self, cam_in_base: np.ndarray) -> None:
        cid = self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_CAMERA, "free")
        self.model.cam_pos[cid] = cam_in_base[:3, 3]
        self.model.cam_quat[cid] = _quat(cam_in_base[:3, :3] @ CV_TO_MJ)
        self._mj.mj_kinematics(self.model, self.data)
        self._mj.mj_camlight(self.model, self.data)

    def render(
        self, camera: str, noise_std: float = 0.0, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """RGB uint8 image from ``camera`` (wrist / fixed / free), plus Gaussian pixel noise."""
        if self._renderer is None:
            self._renderer = self._mj.Renderer(self.model, self.camera.height, self.camera.width)
        self._renderer.update_scene(self.data, camera=camera, scene_option=self._option)
        img = self._renderer.render()
        if noise_std > 0:
            rng = rng or np.random.default_rng()
            img = np.clip(img + rng.normal(0.0, noise_std, img.shape), 0, 255).astype(np.uint8)
        return img

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> CalibrationScene:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _quat(r: np.ndarray) -> list[float]:
    """Rotation matrix -> MuJoCo quaternion (w, x, y, z)."""
    return quat_from_matrix(r).tolist()
