"""RoboTwin 2.0 envs behind the batched contract, through the runtime's ``VectorEnv``.

``VectorEnv`` runs one RoboTwin task per subprocess (spawned) and returns per-env lists; we stack
them once per step. It resets nothing by itself: we keep the episode clock and reset the envs that
finished, like the other simulators, and give ``info["final_state"]`` before resetting.
"""

from __future__ import annotations

import os

import numpy as np

from rlinf_robot.envs.actions import safe_action_spec
from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS, BatchedEnv, Obs, ObsSpec
from rlinf_robot.safety import SafetyLimits
from sim.robotwin import mapping
from sim.robotwin.config import RoboTwinConfig
from sim.robotwin.tasks import RoboTwinTask

_ARM_DOF = 7  # franka-panda


def task_config(task: RoboTwinTask, cfg: RoboTwinConfig) -> dict:
    """The RoboTwin task_config (its YAML schema): joint-state observations, cameras as asked."""
    return {
        "task_name": task.task_name,
        "step_lim": cfg.max_episode_steps,
        "planner_backend": cfg.planner_backend,
        "render_freq": 0,
        "use_seed": False,
        "embodiment": list(cfg.embodiment),
        "language_num": 100,
        "domain_randomization": {
            "random_background": False,
            "cluttered_table": False,
            "clean_background_rate": 1.0,
            "random_head_camera_dis": 0,
            "random_table_height": 0,
            "random_light": False,
            "crazy_random_light_rate": 0,
        },
        "camera": {
            "head_camera_type": "D435",
            "wrist_camera_type": "D435",
            "collect_head_camera": bool(cfg.image_size),
            "collect_wrist_camera": bool(cfg.image_size),
        },
        "data_type": {
            "rgb": bool(cfg.image_size),
            "third_view": False,
            "depth": False,
            "pointcloud": False,
            "observer": False,
            "endpose": False,
            "qpos": True,
            "mesh_segmentation": False,
            "actor_segmentation": False,
        },
        "clear_cache_freq": 8,
        "collect_data": False,
    }


class RoboTwinEnv(BatchedEnv):
    def __init__(self, task: RoboTwinTask, num_envs: int, cfg: RoboTwinConfig):
        os.environ["ASSETS_PATH"] = cfg.assets()
        from robotwin.envs.vector_env import VectorEnv

        self.task, self.cfg, self.num_envs = task, cfg, int(num_envs)
        self.action_spec = safe_action_spec("joint_delta", cfg.gripper, cfg.control_hz)
        fields = ROBOT_STATE_FIELDS + (("other_arm", _ARM_DOF + 1),)
        size = cfg.image_size
        images = {"front": (size, size, 3), "wrist": (size, size, 3)} if size else {}
        self.obs_spec = ObsSpec((sum(w for _, w in fields),), images, fields)
        self._rngs = [np.random.default_rng([cfg.seed or 0, i]) for i in range(self.num_envs)]
        self._venv = VectorEnv(
            task_config=task_config(task, cfg),
            n_envs=self.num_envs,
            env_seeds=[self._episode_seed(i) for i in range(self.num_envs)],
        )
        self.max_episode_steps = int(cfg.max_episode_steps)
        self.terminate_on_success = True  # RoboTwin's episodes end when its task succeeds
        self._raw: list[dict] | None = None
        self._prev: np.ndarray | None = None
        self._cmd: np.ndarray | None = None  # last commanded joint targets

    # ------------------------------------------------------------------ BatchedEnv hooks
    def _reset_all(self, seed: int | None) -> None:
        if seed is not None:
            self._rngs = [np.random.default_rng([seed, i]) for i in range(self.num_envs)]
        self._venv.reset(env_idx=None, env_seeds=[self._episode_seed(i) for i in range(self.num_envs)])
        self._raw = self._venv.get_obs()
        self._prev = None
        self._cmd = None

    def _reset_envs(self, idx: np.ndarray) -> None:
        ids = [int(i) for i in idx]
        self._venv.reset(env_idx=ids, env_seeds=[self._episode_seed(i) for i in ids])
        self._raw = self._venv.get_obs()
        if self._cmd is not None:
            self._cmd[ids] = self._qpos()[ids]

    def _observe(self) -> Obs:
        return self._obs()

    def _state_now(self) -> np.ndarray:
        return self._obs()["state"]

    def _advance(self, actions: np.ndarray, active: np.ndarray, row: int):
        """Joint deltas relative to the last commanded target, at most ``max_target_lead`` ahead of
        the measured joints by ``max_target_lead`` (``rlinf_robot.safety.deltas``' rule). RoboTwin steps every scene: a
        finished env is sent its previous target again, so it holds."""
        qpos = self._qpos()
        held = qpos.copy() if self._cmd is None else self._cmd
        lead = SafetyLimits.from_yaml().max_target_lead
        anchor = qpos + np.clip(held - qpos, -lead, lead) if row == 0 else held
        target = mapping.to_robotwin_action(actions, anchor, self.cfg.arm, self.cfg.gripper, _ARM_DOF)
        target[~active] = held[~active]
        self._cmd = target
        raw, reward, terminated, _, infos = self._venv.step(target[:, None, :].astype(np.float32))
        self._raw, self._prev = list(raw), qpos
        reward = np.asarray(reward, np.float32).reshape(self.num_envs)
        term = np.asarray(terminated, bool).reshape(self.num_envs)
        success = np.array([bool(i.get("success", False)) for i in infos]) if infos else term.copy()
        return reward, success, term & ~success, np.zeros(self.num_envs, bool)

    def close(self) -> None:
        self._venv.close()

    def _episode_seed(self, i: int) -> int:
        return int(self._rngs[i].integers(0, 2**31 - 1))

    def _qpos(self) -> np.ndarray:
        return np.stack([np.asarray(o["state"], np.float64) for o in self._raw])

    def _obs(self) -> Obs:
        qpos = self._qpos()
        state = np.concatenate(
            [
                mapping.robot_state(qpos, self._prev, 1.0 / self.cfg.control_hz, self.cfg.arm, _ARM_DOF),
                mapping.other_arm(qpos, self.cfg.arm, _ARM_DOF),
            ],
            axis=1,
        )
        images = {}
        if self.cfg.image_size:
            wrist_key = f"{self.cfg.arm}_wrist_image"
            images = {
                "front": np.stack(
                    [
                        mapping.square_resize(np.asarray(o["full_image"]), self.cfg.image_size)
                        for o in self._raw
                    ]
                ),
                "wrist": np.stack(
                    [mapping.square_resize(np.asarray(o[wrist_key]), self.cfg.image_size) for o in self._raw]
                ),
            }
        return {
            "state": state,
            "images": images,
            "instruction": [str(o.get("instruction", "")) for o in self._raw],
        }
