"""The batched MuJoCo FR3 env: one model, N MjData, stepped in a thread pool (MuJoCo drops the GIL).

A control tick mirrors the arm: the action becomes a joint position target by the rule the bridge
applies on the robot PC (``rlinf_robot.safety.deltas``: relative to the last commanded target,
bounded like the safety filter bounds a tick), the target is held for ``500 / control_hz`` physics
substeps of the FR3's joint servos, then the state is read back for all envs at once. Episode
rules (time limit, success, resets after a chunk) are ``BatchedEnv``'s, shared with the arm.

With domain randomization each env owns a copy of the model (parameters differ per env and per
episode); without it all envs share one. An env whose episode ended stands still
(its physics is not stepped) until the chunk ends, then resets: ``info["final_state"]`` holds the
state vector that ended it and ``info["success"]`` its outcome.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rlinf_robot.envs.actions import safe_action_spec
from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS, BatchedEnv, Obs, ObsSpec
from rlinf_robot.envs.tasks import READY_Q, Batch, Layout, Task
from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.model import GRIPPER_MAX_WIDTH
from rlinf_robot.rotations import DOWN
from rlinf_robot.safety.deltas import DeltaRule
from sim.mujoco import dr_apply
from sim.mujoco.config import MujocoConfig
from sim.mujoco.scene import build_model, fixed_camera_poses

_CTRL_PER_METRE = 255.0 / GRIPPER_MAX_WIDTH  # the hand actuator's ctrl range 0..255 spans 0..8 cm
GRIP_STIFFNESS_SCALE = 10.0


#: Reference for the TCP quaternion's sign: the gripper pointing down (180 deg about x). The TCP spends
#: its life near this orientation, where "w >= 0" would flip sign at random; q . ref >= 0 does not.
TCP_QUAT_REF = DOWN


def tune_servos(model) -> None:
    """Critically damp the arm's position servos at the start pose (kv_i = 2 sqrt(kp_i M_ii)) and
    stiffen the hand's.

    The shipped kv (kp / 10) makes every joint a 0.1 s first-order lag, so a 20 Hz target would be
    reached only ~40 % within its tick; the real FR3's controller tracks a commanded step within a
    tick or two. Critical damping keeps the same stiffness and settles in ~2-4 physics-ms per mrad.
    """
    import mujoco

    data = mujoco.MjData(model)
    data.qpos[:7] = READY_Q
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    kp = model.actuator_gainprm[:7, 0]
    model.actuator_biasprm[:7, 2] = -2.0 * np.sqrt(kp * np.diag(full)[:7])
    # The shipped hand servo (100 N/m on the finger tendon) squeezes a 4 cm block with ~2 N, too weak
    # to lift it; the real Franka Hand grasps with 20-70 N. Ten times stiffer: ~20 N on that block.
    model.actuator_gainprm[7, 0] *= GRIP_STIFFNESS_SCALE
    model.actuator_biasprm[7, 1:3] *= GRIP_STIFFNESS_SCALE


class MujocoFR3Env(BatchedEnv):
    def __init__(self, task: Task, num_envs: int, cfg: MujocoConfig, scene: str):
        import mujoco

        self._mj = mujoco
        self.task, self.cfg, self.num_envs = task, cfg, int(num_envs)
        if task.gripper and cfg.gripper is False:
            raise ConfigError(f"{task.name} needs the gripper column: gripper must be True (or unset)")
        self.gripper = task.gripper if cfg.gripper is None else bool(cfg.gripper)
        self.max_episode_steps = cfg.max_episode_steps or max(1, round(task.episode_seconds * cfg.control_hz))
        self.terminate_on_success = bool(cfg.terminate_on_success)
        self.substeps = cfg.substeps
        self.dr = cfg.randomization

        base = build_model(scene, cfg.full_meshes, cfg.camera_poses)
        tune_servos(base)
        self.nominal = dr_apply.Nominal.capture(base)
        n = self.num_envs
        self.models = [copy.copy(base) for _ in range(n)] if self.dr is not None else [base] * n
        self.datas = [mujoco.MjData(m) for m in self.models]
        self._tcp = mujoco.mj_name2id(base, mujoco.mjtObj.mjOBJ_SITE, "tcp")
        self.camera_poses = fixed_camera_poses(base)
        obj_joint = mujoco.mj_name2id(base, mujoco.mjtObj.mjOBJ_JOINT, "object_joint")
        self._obj_adr = int(base.jnt_qposadr[obj_joint]) if obj_joint >= 0 else -1
        goal_body = mujoco.mj_name2id(base, mujoco.mjtObj.mjOBJ_BODY, "goal")
        self._goal_mocap = int(base.body_mocapid[goal_body]) if goal_body >= 0 else -1

        self.rule = DeltaRule(cfg.action_mode, self.gripper, cfg.control_hz)
        self.action_spec = safe_action_spec(cfg.action_mode, self.gripper, cfg.control_hz, self.rule.limits)
        images = {c: (cfg.image_size, cfg.image_size, 3) for c in cfg.cameras} if cfg.image_size else {}
        fields = ROBOT_STATE_FIELDS + task.features
        self.obs_spec = ObsSpec((sum(w for _, w in fields),), images, fields)
        self.instruction = task.instruction

        self._hand = mujoco.mj_name2id(base, mujoco.mjtObj.mjOBJ_BODY, "hand")
        self._qpos = np.zeros((n, base.nq))
        self._qvel = np.zeros((n, base.nv))
        self._tcp_pos = np.zeros((n, 3))
        self._tcp_quat = np.zeros((n, 4))
        self._targets = np.tile(READY_Q, (n, 1))
        self._gripper_ctrl = np.full(n, 255.0)
        self._nstep = np.full(n, self.substeps, np.int64)
        self.goal = np.zeros((n, 3))
        self.obj_start = np.zeros((n, 3))
        self.delay = np.zeros(n, np.int64)
        max_delay = self.dr.action_delay_steps[1] if self.dr is not None else 0
        self._history = np.zeros((n, max_delay + 1, self.action_spec.shape[0]), np.float32)
        self._batch: Batch | None = None
        self._layout_rngs: list[np.random.Generator] = []
        self._dr_rngs: list[np.random.Generator] = []
        self._step_rng = np.random.default_rng(0)
        self._noise: np.ndarray | None = None  # observation noise of the current tick (DR)

        threads = cfg.num_threads or min(len(os.sched_getaffinity(0)), max(1, n // 4))
        threads = min(threads, n)
        self._threads = threads
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="mjstep") if threads > 1 else None
        self._rig = None
        if cfg.image_size:
            from sim.mujoco.render import CameraRig

            self._rig = CameraRig(base, cfg.cameras, cfg.image_size, cfg.full_meshes)

    # ------------------------------------------------------------------ BatchedEnv hooks
    def _reset_all(self, seed: int | None) -> None:
        if seed is not None or not self._layout_rngs:
            if seed is None:
                seed = (
                    self.cfg.seed
                    if self.cfg.seed is not None
                    else int(np.random.SeedSequence().entropy % 2**63)
                )
            self._seed(int(seed))
        for i in range(self.num_envs):
            self._reset_env(i)
        self._draw_noise()
        self._batch = self._gather()

    def reset_to(self, layouts: Sequence[Layout]) -> Obs:
        """Start an episode in every env at the given layouts (arm joints, gripper, goal, object)
        instead of sampled ones: a recorded real episode replayed in the sim twin starts where the
        arm started (``rlinf_robot.data.replay``). Randomization is drawn as in ``reset``."""
        if len(layouts) != self.num_envs:
            raise ValueError(f"reset_to needs {self.num_envs} layouts, got {len(layouts)}")
        if not self._layout_rngs:
            self._seed(self.cfg.seed if self.cfg.seed is not None else 0)
        for i, layout in enumerate(layouts):
            self._reset_env(i, layout)
        self._draw_noise()
        self._batch = self._gather()
        self.steps = np.zeros(self.num_envs, np.int64)
        self.episode_return = np.zeros(self.num_envs, np.float32)
        return self._observe()

    def _reset_envs(self, idx: np.ndarray) -> None:
        for i in idx:
            self._reset_env(int(i))
        self._draw_noise()
        self._batch = self._gather()

    def _draw_noise(self) -> None:
        """Observation noise is drawn once per tick (and reset), not per observation, so a chunk
        of H rows sees the same noise as H single steps."""
        if self.dr is not None and self.dr.obs_noise_std > 0:
            shape = (self.num_envs, int(self.obs_spec.state_shape[0]))
            self._noise = self._step_rng.normal(0.0, self.dr.obs_noise_std, shape).astype(np.float32)

    def _observe(self) -> Obs:
        return self._obs(self._batch)

    def _state_now(self) -> np.ndarray:
        return self._state(self._batch)

    def _advance(self, actions: np.ndarray, active: np.ndarray, row: int):
        a = actions
        if self._history.shape[1] > 1:  # action delay: apply the action from `delay` ticks ago
            live = np.flatnonzero(active)
            self._history[live, 1:] = self._history[live, :-1]
            self._history[live, 0] = a[live]
            a = self._history[np.arange(self.num_envs), self.delay]
        b = self._batch
        # A chunk is anchored once, at its start (as the bridge does); its rows follow its targets.
        anchor = self.rule.anchor(self._targets, b.q) if row == 0 else self._targets
        plan = self.rule.plan(anchor[active], a[active][:, None])
        self._targets[active] = plan.targets[:, 0]
        if plan.widths is not None:
            self._gripper_ctrl[active] = plan.widths[:, 0] * _CTRL_PER_METRE
        if self.dr is not None and self.dr.control_jitter > 0:
            u = self._step_rng.uniform(-1.0, 1.0, self.num_envs)
            self._nstep = np.maximum(1, np.rint(self.substeps * (1.0 + self.dr.control_jitter * u))).astype(
                np.int64
            )
        self._physics(np.flatnonzero(active))
        self._draw_noise()
        b = self._batch = self._gather()
        reward, success = self.task.evaluate(b)
        none = np.zeros(self.num_envs, bool)
        return reward.astype(np.float32), success, none, none

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._rig is not None:
            self._rig.close()
            self._rig = None

    def render(self, camera: str = "front", size: int = 96, index: int = 0) -> np.ndarray:
        """One picture of env ``index`` (for docs / debugging; independent of observation images)."""
        from sim.mujoco.render import CameraRig

        rig = CameraRig(self.models[0], (camera,), size, self.cfg.full_meshes)
        try:
            return rig.render([self.models[index]], [self.datas[index]])[camera][0]
        finally:
            rig.close()

    # ------------------------------------------------------------- episodes
    def _seed(self, seed: int) -> None:
        n = self.num_envs
        self._layout_rngs = [np.random.default_rng([seed, i, 0]) for i in range(n)]
        self._dr_rngs = [np.random.default_rng([seed, i, 1]) for i in range(n)]
        self._step_rng = np.random.default_rng([seed, n, 2])

    def _reset_env(self, i: int, layout: Layout | None = None) -> None:
        mj, m, d = self._mj, self.models[i], self.datas[i]
        layout = self.task.sample(self._layout_rngs[i]) if layout is None else layout
        if self.dr is not None:
            params = self.dr.sample(self._dr_rngs[i])
            dr_apply.apply(m, self.nominal, params)
            self.delay[i] = int(params["action_delay_steps"])
        mj.mj_resetData(m, d)
        d.qpos[:7] = layout.arm_q
        d.qpos[7:9] = layout.gripper_width / 2
        if self._obj_adr >= 0 and layout.obj_pos is not None:
            half = layout.obj_yaw / 2
            d.qpos[self._obj_adr : self._obj_adr + 7] = [
                *layout.obj_pos,
                np.cos(half),
                0.0,
                0.0,
                np.sin(half),
            ]
        if self._goal_mocap >= 0:
            d.mocap_pos[self._goal_mocap] = self.task.marker(layout.goal)
        self._targets[i] = layout.arm_q
        self._gripper_ctrl[i] = layout.gripper_width * _CTRL_PER_METRE
        d.ctrl[:7] = layout.arm_q
        d.ctrl[7] = self._gripper_ctrl[i]
        mj.mj_forward(m, d)
        self._copy_out(i, d)
        self.goal[i] = layout.goal
        self.obj_start[i] = layout.obj_pos if layout.obj_pos is not None else 0.0
        self._history[i] = 0.0  # "hold still" (delta 0) at the start width
        if self.gripper:
            self._history[i, :, -1] = layout.gripper_width

    # -------------------------------------------------------------- physics
    def _physics(self, envs: np.ndarray) -> None:
        """Step the envs ``envs`` (the others stand still), spread over the pool's threads."""
        if self._pool is None:
            self._step_envs(envs.tolist())
            return
        parts = [p for p in (envs[k :: self._threads].tolist() for k in range(self._threads)) if p]
        for f in [self._pool.submit(self._step_envs, p) for p in parts]:
            f.result()

    def _step_envs(self, indices: list[int]) -> None:
        """Hold each env's targets for its substeps, then refresh kinematics (mj_step leaves
        positions computed *before* its last integration)."""
        mj = self._mj
        for i in indices:
            m, d = self.models[i], self.datas[i]
            d.ctrl[:7] = self._targets[i]
            d.ctrl[7] = self._gripper_ctrl[i]
            mj.mj_step(m, d, int(self._nstep[i]))
            mj.mj_kinematics(m, d)
            self._copy_out(i, d)

    def _copy_out(self, i: int, d) -> None:
        """Copy env i's state into the batch buffers (in the worker thread, while others step)."""
        self._qpos[i] = d.qpos
        self._qvel[i] = d.qvel
        self._tcp_pos[i] = d.site_xpos[self._tcp]
        self._tcp_quat[i] = d.xquat[self._hand]  # the tcp site has the hand's orientation

    def _gather(self) -> Batch:
        """The batch as views of the buffers: valid until the next physics step or reset, which is
        all the step needs (observations are built from it before either happens)."""
        qpos, qvel, tcp_pos = self._qpos, self._qvel, self._tcp_pos
        q = self._tcp_quat
        tcp_quat = q * np.where(q @ TCP_QUAT_REF < 0, -1.0, 1.0)[:, None]
        obj_pos = obj_quat = None
        if self._obj_adr >= 0:
            a = self._obj_adr
            obj_pos, obj_quat = qpos[:, a : a + 3], qpos[:, a + 3 : a + 7]
            obj_quat = obj_quat * np.where(obj_quat[:, :1] < 0, -1.0, 1.0)
        return Batch(
            qpos[:, :7],
            qvel[:, :7],
            tcp_pos,
            tcp_quat,
            qpos[:, 7] + qpos[:, 8],
            obj_pos,
            obj_quat,
            self.goal,
            self.obj_start,
            self.camera_poses,
        )

    # ---------------------------------------------------------- observation
    def _state(self, b: Batch) -> np.ndarray:
        parts = [b.q, b.qd, b.tcp_pos, b.tcp_quat, b.width[:, None], self.task.observe(b)]
        return np.concatenate(parts, axis=1).astype(np.float32)

    def _obs(self, b: Batch) -> Obs:
        state = self._state(b)
        if self._noise is not None:
            state += self._noise
        images = self._rig.render(self.models, self.datas) if self._rig is not None else {}
        return {"state": state, "images": images, "instruction": [self.instruction] * self.num_envs}
