"""Isaac Lab envs behind the batched contract (GPU; written against Isaac Lab 2.x/3.x sources).

One Isaac Sim app per process (AppLauncher, headless), one vectorized ManagerBasedRLEnv holding all
N envs. Every step reads each quantity once as a whole [N, ...] tensor and copies it to the host in
one transfer; no per-env work. Two edits to the task config make it speak our contract:

* ``joint_delta`` swaps the arm action term for a RelativeJointPositionAction (scale 1: rad);
* a ``success`` termination term is added, evaluated by Isaac Lab *before* its own auto-reset, so
  success is reported for the episode that ended and episodes end on success as ours do.

Isaac Lab resets finished envs inside ``step``; the pre-reset state is not exposed, so
``info["final_state"]`` is absent here (the MuJoCo and ManiSkill envs provide it).
"""

from __future__ import annotations

import importlib.metadata

import numpy as np

from rlinf_robot.envs.actions import safe_action_spec
from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS, BatchedEnv, Obs, ObsSpec
from rlinf_robot.errors import ConfigError
from sim.isaaclab import mapping
from sim.isaaclab.config import IsaacLabConfig
from sim.isaaclab.tasks import IsaacLabTask

_APP = None  # the Isaac Sim application: one per process, started by the first env


def _launch(headless: bool, device: str):
    global _APP
    if _APP is None:
        from isaaclab.app import AppLauncher

        _APP = AppLauncher(headless=headless, device=device).app
    return _APP


def quat_order() -> str:
    """Isaac Lab stores quaternions w-first up to 2.x and x-first (warp's order) from 3.0."""
    major = int(importlib.metadata.version("isaaclab").split(".")[0])
    return "xyzw" if major >= 3 else "wxyz"


def _torch(x):
    """Isaac Lab 3.x keeps asset data in warp arrays, 2.x in torch tensors: give torch either way."""
    if hasattr(x, "detach"):
        return x
    import warp as wp

    return wp.to_torch(x)


def _np(x) -> np.ndarray:
    return _torch(x).detach().cpu().numpy()


def success_term(env, command_name: str, threshold: float, has_object: bool):
    """Termination term (torch, on the device): the goal is reached within ``threshold`` m.

    Lift: the object's position against the object_pose command; reach: the hand's against ee_pose.
    Commands are in the robot base frame, so both positions are taken there.
    """
    import torch
    from isaaclab.utils.math import subtract_frame_transforms

    robot = env.scene["robot"]
    root_pos, root_quat = _torch(robot.data.root_pos_w), _torch(robot.data.root_quat_w)
    if has_object:
        point_w = _torch(env.scene["object"].data.root_pos_w)
    else:
        hand = robot.find_bodies("panda_hand")[0][0]
        point_w = _torch(robot.data.body_pos_w)[:, hand]
    point_b, _ = subtract_frame_transforms(root_pos, root_quat, point_w)
    goal_b = _torch(env.command_manager.get_command(command_name))[:, :3]
    return torch.linalg.vector_norm(point_b - goal_b, dim=1) < threshold


class IsaacLabEnv(BatchedEnv):
    def __init__(self, task: IsaacLabTask, num_envs: int, cfg: IsaacLabConfig):
        _launch(cfg.headless, cfg.device)
        import gymnasium as gym
        import isaaclab_tasks  # noqa: F401 - registers the Isaac-* task ids
        import torch
        from isaaclab.managers import TerminationTermCfg
        from isaaclab_tasks.utils import parse_env_cfg

        self._torch_mod = torch
        self.task, self.cfg, self.num_envs = task, cfg, int(num_envs)
        if cfg.gripper and not task.gripper:
            raise ConfigError(f"gripper: isaaclab/{task.name} has no gripper action term")
        self.gripper = task.gripper if cfg.gripper is None else bool(cfg.gripper)
        self.quat_order = quat_order()
        task_id = task.ik_rel_id if cfg.action_mode == "ee_delta" else task.joint_id
        env_cfg = parse_env_cfg(task_id, device=cfg.device, num_envs=self.num_envs)
        if cfg.action_mode == "joint_delta":
            from isaaclab.envs.mdp.actions.actions_cfg import RelativeJointPositionActionCfg

            env_cfg.actions.arm_action = RelativeJointPositionActionCfg(
                asset_name="robot", joint_names=["panda_joint.*"], scale=1.0, use_zero_offset=True
            )
        threshold = cfg.success_threshold or task.success_threshold
        env_cfg.terminations.success = TerminationTermCfg(
            func=success_term,
            params={"command_name": task.command, "threshold": threshold, "has_object": task.has_object},
        )
        if cfg.seed is not None:
            env_cfg.seed = cfg.seed
        step_dt = env_cfg.sim.dt * env_cfg.decimation
        if cfg.max_episode_steps:
            env_cfg.episode_length_s = cfg.max_episode_steps * step_dt
        self._env = gym.make(task_id, cfg=env_cfg).unwrapped
        robot = self._env.scene["robot"]
        self._joint_ids = list(robot.find_joints("panda_joint.*")[0]) + list(
            robot.find_joints("panda_finger.*")[0]
        )
        self._hand = robot.find_bodies("panda_hand")[0][0]
        arm_term = self._env.action_manager.get_term("arm_action")
        self._ik_scale = float(getattr(arm_term.cfg, "scale", 1.0))
        offset = getattr(arm_term.cfg, "body_offset", None)
        self._ik_offset = float(offset.pos[2]) if offset is not None else 0.0
        self.action_spec = safe_action_spec(cfg.action_mode, self.gripper, 1.0 / step_dt)
        fields = ROBOT_STATE_FIELDS + ((("object_pos", 3),) if task.has_object else ()) + (("goal_pose", 7),)
        self.obs_spec = ObsSpec((sum(w for _, w in fields),), {}, fields)
        self._state: np.ndarray | None = None

    # ------------------------------------------------------------------ BatchedEnv hooks
    # Isaac Lab ends and resets episodes inside its own step (its time-out and the success term
    # added above), so they come back as the simulator's own ends; rows after an env's end get a
    # zero delta (Isaac Lab resets it at once, so it holds its new start until the chunk ends).
    def _reset_all(self, seed: int | None) -> None:
        self._env.reset(seed=seed)
        self._state = self._read_state()

    def _reset_envs(self, idx: np.ndarray) -> None:
        """Nothing to do: Isaac Lab reset these envs in the step that ended them."""

    def _observe(self) -> Obs:
        return self._obs()

    def _state_now(self) -> np.ndarray:
        return self._state

    def _advance(self, actions: np.ndarray, active: np.ndarray, row: int):
        a = np.where(active[:, None], actions, 0.0).astype(np.float32)
        if self.cfg.action_mode == "ee_delta":
            raw = mapping.ee_delta_action(
                a, self._state[:, 17:21], self._ik_scale, self._ik_offset, self.gripper
            )
        else:
            raw = mapping.joint_delta_action(a, self.gripper)
        if not self.task.gripper:
            raw = raw[:, :-1]  # the task has no gripper term to receive it
        act = self._torch_mod.as_tensor(raw, device=self._env.device)
        _, reward, terminated, truncated, _ = self._env.step(act)
        success = _np(self._env.termination_manager.get_term("success")).astype(bool)
        self._state = self._read_state()
        term = _np(terminated).astype(bool) & ~success  # success is BatchedEnv's to judge...
        term |= success  # ...but Isaac Lab has already reset a successful env: it ended here
        return _np(reward).astype(np.float32), success, term, _np(truncated).astype(bool)

    def close(self) -> None:
        self._env.close()

    def _read_state(self) -> np.ndarray:
        robot = self._env.scene["robot"]
        data = robot.data
        root_p, root_q = _np(data.root_pos_w), _np(data.root_quat_w)
        robot_part = mapping.robot_state(
            _np(data.joint_pos)[:, self._joint_ids],
            _np(data.joint_vel)[:, self._joint_ids],
            _np(data.body_pos_w)[:, self._hand],
            _np(data.body_quat_w)[:, self._hand],
            root_p,
            root_q,
            self.quat_order,
        )
        cols = [robot_part]
        if self.task.has_object:
            obj_w = _np(self._env.scene["object"].data.root_pos_w)
            cols.append(mapping.points_in_base(obj_w, root_p, root_q, self.quat_order).astype(np.float32))
        goal = _np(self._env.command_manager.get_command(self.task.command))
        goal = np.concatenate([goal[:, :3], mapping.to_wxyz(goal[:, 3:7], self.quat_order)], axis=1)
        cols.append(goal.astype(np.float32))
        return np.concatenate(cols, axis=1).astype(np.float32)

    def _obs(self) -> Obs:
        return {
            "state": self._state.copy(),
            "images": {},
            "instruction": [self.task.instruction] * self.num_envs,
        }
