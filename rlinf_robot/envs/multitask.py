"""``MultiTaskEnv``: batched envs of several tasks stepped as one batch, for one multi-task policy.

A language-conditioned policy trains on reach, push and lift at once: the learner sees one batch in
which envs ``[0, n_0)`` run the first task, the next ``n_1`` the second, and so on. Each part keeps
its own episodes, time limit, resets and scoring (a part is an ordinary ``BatchedEnv``); this class
only splits actions and joins what comes back.

The joint observation keeps what every part shares: the state columns the parts have in common at
the start (the robot's own ``ROBOT_STATE_FIELDS``; tasks append different columns after them), the
cameras, and each env's instruction. So whatever a task is about - where the ball, the block or
the target is - reaches the policy through the cameras and the words, never through the state.
``part_obs`` keeps each part's full observation of the last reset / step, for scripted experts
that read the task's own columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlinf_robot.envs.spec import BatchedEnv, Obs, ObsSpec


class MultiTaskEnv(BatchedEnv):
    def __init__(self, parts: Sequence[BatchedEnv]):
        if not parts:
            raise ValueError("MultiTaskEnv needs at least one env")
        first = parts[0].action_spec
        for env in parts[1:]:
            a = env.action_spec
            same = (a.mode, a.shape, a.control_hz, a.gripper) == (
                first.mode,
                first.shape,
                first.control_hz,
                first.gripper,
            ) and (np.array_equal(a.low, first.low) and np.array_equal(a.high, first.high))
            if not same:
                raise ValueError(
                    f"every task must act alike: {a.mode} {a.shape} at {a.control_hz} Hz "
                    f"(gripper {a.gripper}) vs {first.mode} {first.shape} at {first.control_hz} Hz "
                    f"(gripper {first.gripper}); make the envs with the same action options"
                )
            if env.obs_spec.images != parts[0].obs_spec.images:
                raise ValueError(
                    f"every task must see the same cameras: {env.obs_spec.images} vs {parts[0].obs_spec.images}"
                )
        shared = _common_prefix([env.obs_spec.state_fields for env in parts])
        if not shared:
            raise ValueError("the tasks' state vectors share no named leading columns")
        self.parts = list(parts)
        self.sizes = [env.num_envs for env in parts]
        self._bounds = np.cumsum([0, *self.sizes])
        self.num_envs = int(self._bounds[-1])
        self.width = sum(w for _, w in shared)
        self.action_spec = first
        self.obs_spec = ObsSpec((self.width,), dict(parts[0].obs_spec.images), shared)
        self.max_episode_steps = max(env.max_episode_steps for env in parts)
        self.terminate_on_success = all(env.terminate_on_success for env in parts)
        self.part_obs: list[Obs] = []

    @property
    def steps(self) -> np.ndarray:  # type: ignore[override]
        return np.concatenate([env.steps for env in self.parts])

    @property
    def episode_return(self) -> np.ndarray:  # type: ignore[override]
        return np.concatenate([env.episode_return for env in self.parts])

    @property
    def privileged_width(self) -> int:
        return max(int(np.prod(env.obs_spec.state_shape)) for env in self.parts) - self.width

    def privileged(self) -> np.ndarray:
        """[N, P] each env's task columns as of the last reset / step (goal, block pose, ...), the
        part the joint state leaves out, NaN-padded to the widest task: what a sim knows and a
        pixel policy must infer (auxiliary training targets, ``record_expert(privileged=...)``)."""
        cols = [o["state"][:, self.width :] for o in self.part_obs]
        out = np.full((self.num_envs, self.privileged_width), np.nan, np.float32)
        for c, lo in zip(cols, self._bounds, strict=False):
            out[lo : lo + len(c), : c.shape[1]] = c
        return out

    def task_of(self) -> np.ndarray:
        """[N] index of the part (task) each env belongs to."""
        return np.repeat(np.arange(len(self.parts)), self.sizes)

    # ------------------------------------------------------------------ contract
    def reset(self, seed: int | None = None) -> Obs:
        """Every part's ``reset(seed)``: a seed gives every part its own reproducible episodes."""
        self.part_obs = [env.reset(seed=seed) for env in self.parts]
        return self._joined()

    def chunk_step(self, actions: np.ndarray) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict]:
        a = np.asarray(actions, dtype=np.float32)
        if a.ndim != 3 or a.shape[0] != self.num_envs:
            raise ValueError(
                f"chunk_step needs actions [N={self.num_envs}, H>=1, {self.action_spec.shape[0]}], got {a.shape}"
            )
        if not np.all(np.isfinite(a)):  # checked for the whole batch before any part moves
            raise ValueError("actions contain NaN or inf; nothing was applied")
        outs = [
            env.chunk_step(a[lo:hi])
            for env, lo, hi in zip(self.parts, self._bounds, self._bounds[1:], strict=False)
        ]
        self.part_obs = [o[0] for o in outs]
        reward, term, trunc = (np.concatenate([o[k] for o in outs]) for k in (1, 2, 3))
        return self._joined(), reward, term, trunc, self._joined_info([o[4] for o in outs])

    def close(self) -> None:
        for env in self.parts:
            env.close()

    # ------------------------------------------------------------------ joining
    def _joined(self) -> Obs:
        obs = self.part_obs
        images = {cam: np.concatenate([o["images"][cam] for o in obs]) for cam in self.obs_spec.images}
        return {
            "state": np.concatenate([o["state"][:, : self.width] for o in obs]),
            "images": images,
            "instruction": [text for o in obs for text in o["instruction"]],
        }

    def _joined_info(self, infos: list[dict]) -> dict:
        """Per-env entries joined in env order; ``final_state`` cut to the shared columns, and the
        per-episode entries (present when any env ended) zero for the parts in which none did."""
        out: dict = {}
        keys = {k for info in infos for k in info}
        for key in keys:
            cols = []
            for info, env in zip(infos, self.parts, strict=True):
                v = info.get(key)
                if v is None:
                    shape = (env.num_envs, self.width) if key == "final_state" else (env.num_envs,)
                    v = np.zeros(shape, np.float32)
                v = np.asarray(v)
                if key == "final_state":
                    v = v[:, : self.width]
                if v.ndim == 0 or v.shape[0] != env.num_envs:
                    break  # not a per-env entry: left out
                cols.append(v)
            else:
                out[key] = np.concatenate(cols)
        return out

    # ------------------------------------------------------------------ unused hooks
    # reset / chunk_step above delegate whole calls to the parts, which run their own hooks.
    def _reset_all(self, seed: int | None) -> None:
        self.reset(seed)

    def _reset_envs(self, idx: np.ndarray) -> None:
        raise NotImplementedError("each part resets its own envs")

    def _observe(self) -> Obs:
        return self._joined()


def _common_prefix(fields: list[tuple[tuple[str, int], ...]]) -> tuple[tuple[str, int], ...]:
    out = []
    for column in zip(*fields, strict=False):
        if any(c != column[0] for c in column):
            break
        out.append(column[0])
    return tuple(out)
