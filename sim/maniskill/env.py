"""ManiSkill3 envs behind the batched contract.

CPU backend: N single-env PhysX CPU scenes (ManiSkill cannot batch CPU physics in one scene), each
stepped in turn, state observations only. GPU backend: one PhysX GPU scene holding all N envs; its
tensors come back as one batch (one device-to-host copy per key, no per-env copies), images from the
task's ``base_camera`` as the ``front`` camera. Either way the episode rules are ``BatchedEnv``'s
(our own clock; an env whose episode ended stands still until the chunk ends, then resets): on the
CPU backend a finished env's scene is not stepped, on the GPU backend it is sent a zero delta, which
ManiSkill's target-delta controllers hold.
"""

from __future__ import annotations

import contextlib

import numpy as np

from rlinf_robot.envs.actions import safe_action_spec
from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS, BatchedEnv, Obs, ObsSpec
from sim.maniskill import mapping
from sim.maniskill.config import ManiSkillConfig
from sim.maniskill.tasks import ManiSkillTask


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


class ManiSkillEnv(BatchedEnv):
    def __init__(self, task: ManiSkillTask, num_envs: int, cfg: ManiSkillConfig):
        if cfg.backend == "cpu":
            from sim.maniskill import cpu_shim

            cpu_shim.install()
        import gymnasium as gym
        import mani_skill.envs  # noqa: F401 - registers the ManiSkill env ids
        import torch

        self._torch = torch
        self.task, self.cfg, self.num_envs = task, cfg, int(num_envs)
        kwargs = dict(control_mode=mapping.CONTROL_MODES[cfg.action_mode], reward_mode="normalized_dense")
        if cfg.backend == "cpu":
            kwargs.update(obs_mode="state_dict", sim_backend="physx_cpu", render_backend="none", num_envs=1)
            self._envs = [gym.make(task.env_id, **kwargs).unwrapped for _ in range(self.num_envs)]
        else:
            obs_mode = "rgb" if cfg.image_size else "state_dict"
            size = cfg.image_size or 128
            kwargs.update(
                obs_mode=obs_mode,
                sim_backend="physx_cuda",
                num_envs=self.num_envs,
                sensor_configs=dict(width=size, height=size),
            )
            self._envs = [gym.make(task.env_id, **kwargs).unwrapped]
        first = self._envs[0]
        self.scales = mapping.ControllerScales.from_configs(first.agent.controller.configs)
        self.action_spec = safe_action_spec(cfg.action_mode, cfg.gripper, float(first.control_freq))
        self.max_episode_steps = cfg.max_episode_steps or gym.spec(task.env_id).max_episode_steps or 100
        self.terminate_on_success = bool(cfg.terminate_on_success)
        self._rngs = [np.random.default_rng([cfg.seed or 0, i]) for i in range(self.num_envs)]
        self._last: dict | None = None
        # The task columns are whatever ManiSkill's "extra" observation holds: read them once.
        raw, _ = first.reset(seed=0)
        fields, _ = mapping.task_fields(self._extra(raw, 1), 1)
        all_fields = ROBOT_STATE_FIELDS + fields
        images = {"front": (cfg.image_size, cfg.image_size, 3)} if cfg.image_size else {}
        self.obs_spec = ObsSpec((sum(w for _, w in all_fields),), images, all_fields)

    @contextlib.contextmanager
    def _cpu_threads(self):
        """One torch thread while a CPU scene steps: its tensors are a few numbers per env, so
        fanning ops out over cores only adds synchronization (and stalls on a busy machine).
        Restored afterwards, so the rest of the process keeps its own setting."""
        if self.cfg.backend != "cpu":
            yield
            return
        before = self._torch.get_num_threads()
        self._torch.set_num_threads(1)
        try:
            yield
        finally:
            self._torch.set_num_threads(before)

    # ------------------------------------------------------------------ BatchedEnv hooks
    def _reset_all(self, seed: int | None) -> None:
        with self._cpu_threads():
            if seed is not None:
                self._rngs = [np.random.default_rng([seed, i]) for i in range(self.num_envs)]
            if self.cfg.backend == "cpu":
                self._last = self._merge(
                    [e.reset(seed=self._episode_seed(i))[0] for i, e in enumerate(self._envs)]
                )
            else:
                seeds = [self._episode_seed(i) for i in range(self.num_envs)]
                self._last = self._batch(self._envs[0].reset(seed=seeds)[0])

    def _reset_envs(self, idx: np.ndarray) -> None:
        with self._cpu_threads():
            self._reset_done(idx)

    def _observe(self) -> Obs:
        return self._obs(self._last)

    def _state_now(self) -> np.ndarray:
        return self._state(self._last)

    def _advance(self, actions: np.ndarray, active: np.ndarray, row: int):
        with self._cpu_threads():
            return self._step(actions, active)

    def _step(self, actions: np.ndarray, active: np.ndarray):
        a = np.where(active[:, None], actions, 0.0).astype(np.float32)
        if self.action_spec.gripper:  # a finished env keeps its fingers where they are
            a[~active, -1] = self._last["qpos"][~active, 7:9].sum(axis=1)
        ms = self._torch.from_numpy(
            mapping.to_maniskill_action(a, self.cfg.action_mode, self.cfg.gripper, self.scales)
        )
        n = self.num_envs
        reward, success = np.zeros(n, np.float32), np.zeros(n, bool)
        if self.cfg.backend == "cpu":
            live = np.flatnonzero(active)
            outs = {int(i): self._envs[i].step(ms[i : i + 1]) for i in live}
            fresh = {i: self._batch(o[0], 1) for i, o in outs.items()}
            self._write_rows(fresh)
            for i, o in outs.items():
                reward[i] = float(_np(o[1]).reshape(()))
                success[i] = bool(_np(o[4]["success"]).reshape(()))
        else:
            out = self._envs[0].step(ms.to(self._envs[0].device))
            self._last = self._batch(out[0])
            reward = _np(out[1]).reshape(n).astype(np.float32)
            success = _np(out[4]["success"]).reshape(n).astype(bool)
        none = np.zeros(n, bool)
        return reward.astype(np.float32), success, none, none

    def close(self) -> None:
        for e in self._envs:
            e.close()
        self._envs = []

    # ------------------------------------------------------------- internals
    def _episode_seed(self, i: int) -> int:
        return int(self._rngs[i].integers(0, 2**31 - 1))

    def _write_rows(self, fresh: dict[int, dict]) -> None:
        """Overwrite rows of the batch with single-env batches (CPU backend)."""
        for key, value in self._last.items():
            if isinstance(value, dict):
                continue
            for i, f in fresh.items():
                value[i] = f[key][0]
        for i, f in fresh.items():
            for k, v in f["extra"].items():
                self._last["extra"][k][i] = v[0]

    def _reset_done(self, idx: np.ndarray) -> None:
        if self.cfg.backend == "cpu":
            parts = {int(i): self._envs[i].reset(seed=self._episode_seed(int(i)))[0] for i in idx}
            self._write_rows({i: self._batch(o, 1) for i, o in parts.items()})
        else:
            env = self._envs[0]
            raw, _ = env.reset(options={"env_idx": self._torch.as_tensor(idx, device=env.device)})
            self._last = self._batch(raw)

    def _extra(self, raw: dict, n: int) -> dict[str, np.ndarray]:
        return {k: _np(v).reshape(n, -1) for k, v in raw["extra"].items()}

    def _batch(self, raw: dict, n: int | None = None) -> dict:
        """A ManiSkill observation (batched tensors) -> numpy arrays [n, ...] we read from."""
        n = n or self.num_envs
        env = self._envs[0]
        out = {
            "qpos": _np(raw["agent"]["qpos"]).reshape(n, -1).astype(np.float64),
            "qvel": _np(raw["agent"]["qvel"]).reshape(n, -1).astype(np.float64),
            "tcp_pose": _np(raw["extra"]["tcp_pose"]).reshape(n, 7).astype(np.float64),
            "root_pose": np.broadcast_to(_np(env.agent.robot.pose.raw_pose).reshape(-1, 7), (n, 7)).astype(
                np.float64
            ),
            "extra": self._extra(raw, n),
        }
        if self.cfg.image_size:
            out["front"] = _np(raw["sensor_data"]["base_camera"]["rgb"]).reshape(
                n, *self.obs_spec.images["front"]
            )
        return out

    def _merge(self, raws: list[dict]) -> dict:
        parts = [self._batch(r, 1) for r in raws]
        merged = {k: np.concatenate([p[k] for p in parts]) for k in parts[0] if k != "extra"}
        merged["extra"] = {k: np.concatenate([p["extra"][k] for p in parts]) for k in parts[0]["extra"]}
        return merged

    def _state(self, b: dict) -> np.ndarray:
        robot = mapping.robot_state(b["qpos"], b["qvel"], b["tcp_pose"], b["root_pose"])
        _, task = mapping.task_fields(b["extra"], self.num_envs)
        return np.concatenate([robot, task], axis=1).astype(np.float32)

    def _obs(self, b: dict) -> Obs:
        images = {"front": b["front"].astype(np.uint8)} if self.cfg.image_size else {}
        return {
            "state": self._state(b),
            "images": images,
            "instruction": [self.task.instruction] * self.num_envs,
        }
