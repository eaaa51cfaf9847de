"""A tiny numpy stand-in env that follows the batched contract (ee_delta), for fast loop tests.

The TCP is a point that moves by the commanded dxyz; the goal is a random point in a 20 cm cube;
success = within 2 cm. Rotation columns are ignored. Optional 32x32 "camera" shows the goal as a
bright pixel blob, so image policies can be exercised too. It is not a physics sim: the learning
tests proper run on ``mujoco/fr3-reach``.
"""

from __future__ import annotations

import numpy as np

from rlinf_robot.envs.spec import ActionSpec, BatchedEnv, ObsSpec


class PointReachEnv(BatchedEnv):
    def __init__(self, num_envs: int = 8, max_steps: int = 30, image_size: int = 0, seed: int = 0):
        self.num_envs = num_envs
        self.max_episode_steps = max_steps
        self.terminate_on_success = True
        self.image_size = image_size
        high = np.array([0.02] * 3 + [0.1] * 3, np.float32)
        self.action_spec = ActionSpec("ee_delta", (6,), -high, high, 20.0)
        self.obs_spec = ObsSpec((6,), {"front": (image_size, image_size, 3)} if image_size else {})
        self._rng = np.random.default_rng(seed)
        self.pos = np.zeros((num_envs, 3), np.float32)
        self.goal = np.zeros((num_envs, 3), np.float32)

    def _reset_idx(self, idx):
        self.pos[idx] = 0.0
        self.goal[idx] = self._rng.uniform(-0.1, 0.1, (len(idx), 3)).astype(np.float32)

    def _obs(self):
        obs = {"state": np.concatenate([self.pos, self.goal - self.pos], 1) * 10.0, "images": {}}
        obs["instruction"] = ["reach the goal"] * self.num_envs
        if self.image_size:
            img = np.zeros((self.num_envs, self.image_size, self.image_size, 3), np.uint8)
            s = self.image_size
            d = self.goal - self.pos
            px = np.clip(((d[:, :2] + 0.2) / 0.4 * (s - 1)).round().astype(int), 0, s - 1)
            for i in range(self.num_envs):
                img[i, max(px[i, 1] - 1, 0) : px[i, 1] + 2, max(px[i, 0] - 1, 0) : px[i, 0] + 2, 0] = 255
                img[i, :, :, 1] = np.uint8(np.clip((d[i, 2] + 0.2) / 0.4 * 255, 0, 255))
            obs["images"] = {"front": img}
        return obs

    # BatchedEnv hooks: the base class runs the episode rules (time limit, success, resets)
    def _reset_all(self, seed):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._reset_idx(np.arange(self.num_envs))

    def _reset_envs(self, idx):
        self._reset_idx(idx)

    def _observe(self):
        return self._obs()

    def _state_now(self):
        return self._obs()["state"]

    def _advance(self, actions, active, row):
        a = self.action_spec.clip(np.asarray(actions, np.float32))
        self.pos[active] += a[active, :3]
        dist = np.linalg.norm(self.goal - self.pos, axis=1)
        success = dist < 0.02
        reward = (-dist * 10.0 + success * 1.0).astype(np.float32)
        none = np.zeros(self.num_envs, bool)
        return reward, success, none, none

    def expert_actions(self) -> np.ndarray:
        """A scripted expert: move straight at the goal at full speed."""
        a = np.zeros((self.num_envs, 6), np.float32)
        a[:, :3] = np.clip(self.goal - self.pos, -0.02, 0.02)
        return a
